//! An autoscaler read from a manifest — a HorizontalPodAutoscaler or a KEDA ScaledObject — as
//! the workload it scales, its replica range and triggers, and how soon it scales down. Every
//! count is read as the Kubernetes API server takes it (an int32 in its range, a whole
//! number), so a manifest the cluster would refuse is refused here, naming the field.

use super::manifest::{s, scalar, Doc};
use crate::error::BadInput;
use crate::topology::{Autoscaler, Trigger};
use serde_json::Value;

/// An autoscaler of the workload its `scaleTargetRef` names (kind, name), with its bounds.
fn scaling(
    d: &Doc,
    by: String,
    (min, max): (u32, u32),
    triggers: Vec<Trigger>,
) -> (String, String, Autoscaler) {
    let v = &d.value;
    (
        s(v, "/spec/scaleTargetRef/kind")
            .unwrap_or("Deployment")
            .to_string(),
        s(v, "/spec/scaleTargetRef/name").unwrap_or("").to_string(),
        Autoscaler {
            by,
            min,
            max,
            triggers,
            scale_down: None,
            line: Some(d.line),
        },
    )
}

/// A HorizontalPodAutoscaler: the workload it scales, its bounds and what it scales on.
pub(super) fn hpa(d: &Doc, name: &str) -> Result<(String, String, Autoscaler), BadInput> {
    let v = &d.value;
    let object = format!("HorizontalPodAutoscaler {name}");
    let count = |path: &str, lo: i64| int32_at(v, path, (lo, i64::MAX), &object, d.line);
    let mut triggers: Vec<Trigger> = v
        .pointer("/spec/metrics")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|m| Trigger {
            kind: match s(m, "/type") {
                Some("Resource") => s(m, "/resource/name").unwrap_or("resource").to_string(),
                Some("ContainerResource") => s(m, "/containerResource/name")
                    .unwrap_or("resource")
                    .to_string(),
                Some(other) => other.to_ascii_lowercase(),
                None => "unknown".into(),
            },
            ..Trigger::default()
        })
        .collect();
    if v.pointer("/spec/targetCPUUtilizationPercentage").is_some() {
        triggers.push(Trigger {
            kind: "cpu".into(),
            ..Trigger::default()
        });
    }
    let bounds = bounds(
        count("/spec/minReplicas", 0)?.unwrap_or(1),
        count("/spec/maxReplicas", 1)?.unwrap_or(1),
        &object,
        d.line,
    )?;
    let mut a = scaling(d, object.clone(), bounds, triggers);
    a.2.scale_down = Some(stabilization(v, "/spec/behavior", &object, d.line)?);
    Ok(a)
}

/// An autoscaler's replica range, refused when it is empty (min above max: the cluster refuses
/// it too).
fn bounds(min: u32, max: u32, object: &str, line: usize) -> Result<(u32, u32), BadInput> {
    if min > max {
        return Err(BadInput(format!(
            "{object} (line {line}): its minimum replicas ({min}) are above its maximum ({max}): \
             Kubernetes and KEDA refuse such a range — set the maximum at least as high"
        )));
    }
    Ok((min, max))
}

/// A KEDA ScaledObject: the workload it scales, its bounds and its triggers.
pub(super) fn scaled_object(d: &Doc, name: &str) -> Result<(String, String, Autoscaler), BadInput> {
    let v = &d.value;
    let object = format!("ScaledObject {name}");
    let count = |path: &str, lo: i64| int32_at(v, path, (lo, i64::MAX), &object, d.line);
    let triggers = v
        .pointer("/spec/triggers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|t| Trigger {
            kind: s(t, "/type").unwrap_or("unknown").to_string(),
            list_name: t.pointer("/metadata/listName").map(scalar),
            database: t.pointer("/metadata/databaseIndex").map(scalar),
            inline_password: t
                .pointer("/metadata/password")
                .is_some_and(|p| !scalar(p).is_empty())
                || ["/metadata/address", "/metadata/addresses", "/metadata/host"]
                    .iter()
                    .filter_map(|k| t.pointer(k).map(scalar))
                    .any(|a| crate::wire::url::redact(&a) != a),
        })
        .collect();
    let bounds = bounds(
        count("/spec/minReplicaCount", 0)?.unwrap_or(0),
        count("/spec/maxReplicaCount", 1)?.unwrap_or(100),
        &object,
        d.line,
    )?;
    let mut a = scaling(d, object.clone(), bounds, triggers);
    let hpa = stabilization(
        v,
        "/spec/advanced/horizontalPodAutoscalerConfig/behavior",
        &object,
        d.line,
    )?;
    // KEDA takes the last pod away `cooldownPeriod` after the trigger went quiet.
    let cooldown = match count("/spec/cooldownPeriod", 0)? {
        Some(c) => (c, "cooldownPeriod".to_string()),
        None => (
            300,
            "cooldownPeriod unset (KEDA's default 300 s)".to_string(),
        ),
    };
    a.2.scale_down = Some(if a.2.min == 0 && cooldown.0 < hpa.0 {
        cooldown
    } else {
        hpa
    });
    Ok(a)
}

/// An HPA behaviour's scale-down stabilisation window (Kubernetes takes 0–3600 s), or its
/// default.
fn stabilization(
    v: &Value,
    behavior: &str,
    object: &str,
    line: usize,
) -> Result<(u32, String), BadInput> {
    let path = format!("{behavior}/scaleDown/stabilizationWindowSeconds");
    Ok(match int32_at(v, &path, (0, 3600), object, line)? {
        Some(w) => (w, "behavior.scaleDown.stabilizationWindowSeconds".into()),
        None => (
            300,
            "behavior.scaleDown.stabilizationWindowSeconds unset (Kubernetes' default 300 s)"
                .into(),
        ),
    })
}

/// A count the Kubernetes API takes as an int32 in `lo..=hi`, read as the API server would:
/// a whole number (a YAML float with no fraction, such as 1e9, is one). Anything else — a
/// negative count, a fraction, "300s", beyond int32 — the cluster refuses, and so does this,
/// naming the object, the field and the range. None when the field is absent.
pub(super) fn int32_at(
    v: &Value,
    path: &str,
    (lo, hi): (i64, i64),
    object: &str,
    line: usize,
) -> Result<Option<u32>, BadInput> {
    let Some(x) = v.pointer(path) else {
        return Ok(None);
    };
    let n = x.as_i64().or_else(|| {
        x.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9e15)
            .map(|f| f as i64)
    });
    match n {
        Some(n) if (lo..=hi.min(i32::MAX as i64)).contains(&n) => Ok(Some(n as u32)),
        _ => Err(BadInput(format!(
            "{object} (line {line}): {} is {}: Kubernetes takes a whole number from {lo} to {} \
             there and would refuse this manifest",
            path.trim_start_matches('/').replace('/', "."),
            crate::util::truncate(&crate::util::escape_control(&scalar(x)), 30),
            hi.min(i32::MAX as i64)
        ))),
    }
}
