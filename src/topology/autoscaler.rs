//! An autoscaler read from a manifest — a HorizontalPodAutoscaler or a KEDA ScaledObject — as
//! the workload it scales, its replica range and triggers, and how soon it scales down. Every
//! count is read as the Kubernetes API server takes it (an int32 in its range, a whole
//! number), so a manifest the cluster would refuse is refused here, naming the field.

use super::manifest::{s, scalar, Doc};
use crate::error::BadInput;
use crate::model::autoscaler::{Control, Metric, Policy, RatePolicy, Rules, Select};
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
            control: None,
            also: Vec::new(),
        },
    )
}

/// Fields the API server requires, of the type it requires: `spec` an object, each `required`
/// path present, each `lists` path (when present) a list — refused naming the field, where a
/// reader that skipped them would say nothing of an object the cluster refuses.
fn shape(
    v: &Value,
    (object, line): (&str, usize),
    required: &[&str],
    lists: &[&str],
) -> Result<(), BadInput> {
    if !v.get("spec").is_some_and(Value::is_object) {
        return Err(BadInput(format!(
            "{object} (line {line}): spec is not an object: the API server refuses it"
        )));
    }
    for path in required {
        if v.pointer(path).is_none_or(Value::is_null) {
            return Err(BadInput(format!(
                "{object} (line {line}): {} is required and missing: the API server refuses it",
                path.trim_start_matches('/').replace('/', ".")
            )));
        }
    }
    for path in lists {
        if v.pointer(path).is_some_and(|x| !x.is_array()) {
            return Err(BadInput(format!(
                "{object} (line {line}): {} is not a list: the API server refuses it",
                path.trim_start_matches('/').replace('/', ".")
            )));
        }
    }
    Ok(())
}

/// A HorizontalPodAutoscaler: the workload it scales, its bounds and what it scales on.
pub(super) fn hpa(d: &Doc, name: &str) -> Result<(String, String, Autoscaler), BadInput> {
    let v = &d.value;
    let object = format!("HorizontalPodAutoscaler {name}");
    shape(
        v,
        (&object, d.line),
        &["/spec/maxReplicas"],
        &["/spec/metrics"],
    )?;
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
            // A metric source never needs a credential: a URL with one (a selector or an
            // adapter's query naming `user:password@host`) is flagged, its value never kept.
            inline_password: holds_credentials(m),
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
    a.2.control = Some(hpa_control(v, &object, bounds));
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
    shape(
        v,
        (&object, d.line),
        &["/spec/triggers"],
        &["/spec/triggers"],
    )?;
    let count = |path: &str, lo: i64| int32_at(v, path, (lo, i64::MAX), &object, d.line);
    let triggers = keda_triggers(v);
    let bounds = keda_bounds(d, &object)?;
    let mut a = scaling(d, object.clone(), bounds, triggers);
    let poll = count("/spec/pollingInterval", 1)?;
    a.2.control = Some(keda_control(v, &object, bounds, poll));
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

/// Whether any text in `v` is a URL carrying `user:password@`.
fn holds_credentials(v: &Value) -> bool {
    match v {
        Value::String(t) => crate::wire::url::redact(t) != *t,
        Value::Array(a) => a.iter().any(holds_credentials),
        Value::Object(o) => o.values().any(holds_credentials),
        _ => false,
    }
}

/// A KEDA object's replica range: `minReplicaCount` (default 0) and `maxReplicaCount` (100).
fn keda_bounds(d: &Doc, object: &str) -> Result<(u32, u32), BadInput> {
    let count = |path: &str, lo: i64| int32_at(&d.value, path, (lo, i64::MAX), object, d.line);
    bounds(
        count("/spec/minReplicaCount", 0)?.unwrap_or(0),
        count("/spec/maxReplicaCount", 1)?.unwrap_or(100),
        object,
        d.line,
    )
}

/// A KEDA object's triggers (a ScaledObject's or a ScaledJob's), the password never kept.
fn keda_triggers(v: &Value) -> Vec<Trigger> {
    v.pointer("/spec/triggers")
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
            // Resolved against the input's TriggerAuthentications by the reader (k8s.rs).
            auth_ref: s(t, "/authenticationRef/name").map(|n| (n.to_string(), false)),
        })
        .collect()
}

/// A KEDA ScaledJob: Jobs of its template started per trigger count, up to its maximum. Its
/// triggers are read as a ScaledObject's; it scales no replicas, so it is not replayed.
pub(super) fn scaled_job(d: &Doc, name: &str) -> Result<(String, String, Autoscaler), BadInput> {
    let v = &d.value;
    let object = format!("ScaledJob {name}");
    let bounds = keda_bounds(d, &object)?;
    let (_, _, mut a) = scaling(d, object, bounds, keda_triggers(v));
    a.control = Some(Control::NotReplayed(
        "a ScaledJob starts a Job per pending count, not replicas of a Deployment (and an n8n worker never ends its Job)".into(),
    ));
    Ok(("ScaledJob".into(), name.to_string(), a))
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

/// A quantity as Kubernetes writes it ("10400m", "10", "1.5", "2k"), as a number.
fn quantity(v: &Value) -> Option<f64> {
    let text = scalar(v);
    let t = text.trim();
    let (num, scale) = match t.char_indices().last() {
        Some((i, 'm')) => (&t[..i], 1e-3),
        Some((i, 'k')) => (&t[..i], 1e3),
        Some((i, 'M')) => (&t[..i], 1e6),
        _ => (t, 1.0),
    };
    num.parse::<f64>()
        .ok()
        .map(|n| n * scale)
        .filter(|n| n.is_finite() && *n >= 0.0)
}

/// An HPA behaviour's direction: its window, policies and selection, Kubernetes' defaults for
/// what is not written.
fn rules(v: &Value, path: &str, up: bool) -> Rules {
    let d = if up {
        Rules::default_up()
    } else {
        Rules::default_down()
    };
    let Some(b) = v.pointer(path) else { return d };
    let policies: Vec<RatePolicy> = b
        .pointer("/policies")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some(RatePolicy {
                percent: s(p, "/type")? == "Percent",
                value: p.pointer("/value")?.as_u64()?.min(u64::from(u32::MAX)) as u32,
                period_s: p.pointer("/periodSeconds")?.as_u64()?.min(1800) as u32,
            })
        })
        .collect();
    Rules {
        window_s: b
            .pointer("/stabilizationWindowSeconds")
            .and_then(Value::as_u64)
            .map_or(d.window_s, |w| w.min(3600) as u32),
        policies: if policies.is_empty() {
            d.policies
        } else {
            policies
        },
        select: match s(b, "/selectPolicy") {
            Some("Min") => Select::Min,
            Some("Disabled") => Select::Disabled,
            _ => Select::Max,
        },
    }
}

/// What a Redis list trigger counts, from its list's name.
fn list_metric(list: &str) -> Metric {
    if list.ends_with(":jobs:wait") {
        Metric::Waiting
    } else if list.ends_with(":jobs:active") {
        Metric::Active
    } else {
        Metric::Nothing
    }
}

/// A ScaledObject's loop: its Redis list triggers (KEDA's default `listLength` 5), added by a
/// `scalingModifiers` formula that sums them, polled every `pollingInterval` (default 30 s).
fn keda_control(v: &Value, object: &str, (min, max): (u32, u32), poll: Option<u32>) -> Control {
    let triggers: Vec<&Value> = v
        .pointer("/spec/triggers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let mut signals = Vec::new();
    let mut names = Vec::new();
    for t in &triggers {
        let kind = s(t, "/type").unwrap_or("");
        if !kind.starts_with("redis") {
            return Control::NotReplayed(format!(
                "its {kind} trigger is not a queue list the replay can count"
            ));
        }
        let list = t
            .pointer("/metadata/listName")
            .map(scalar)
            .unwrap_or_default();
        let target = t
            .pointer("/metadata/listLength")
            .and_then(quantity)
            .unwrap_or(5.0);
        signals.push((list_metric(&list), target));
        names.push(s(t, "/name").unwrap_or("").to_string());
    }
    if signals.is_empty() {
        return Control::NotReplayed("it has no trigger".into());
    }
    if let Some(m) = v.pointer("/spec/advanced/scalingModifiers") {
        match modified(m, &signals, &names) {
            Ok(one) => signals = vec![one],
            Err(why) => return Control::NotReplayed(why.0),
        }
    }
    if let Some((_, t)) = signals.iter().find(|(_, t)| *t <= 0.0) {
        return Control::NotReplayed(format!(
            "a trigger's listLength is {t}: KEDA refuses a target that is not positive"
        ));
    }
    let behavior = "/spec/advanced/horizontalPodAutoscalerConfig/behavior";
    Control::Replayable(Policy {
        name: object.to_string(),
        poll_s: poll.unwrap_or(30),
        signals,
        min,
        max,
        up: rules(v, &format!("{behavior}/scaleUp"), true),
        down: rules(v, &format!("{behavior}/scaleDown"), false),
    })
}

/// The one signal KEDA's `scalingModifiers` makes of the triggers: its formula read as a
/// weighted sum of their names, against its target; why it cannot be replayed otherwise.
fn modified(
    m: &Value,
    signals: &[(Metric, f64)],
    names: &[String],
) -> Result<(Metric, f64), super::formula::Unread> {
    let formula = s(m, "/formula").unwrap_or("");
    let shown = crate::util::truncate(formula, 120);
    let target = m.pointer("/target").and_then(quantity);
    let read = super::formula::parse(formula).and_then(|e| {
        super::formula::weights(&e, names).ok_or_else(|| {
            super::formula::Unread("it is not a weighted sum of its triggers' names".to_string())
        })
    });
    let (w, constant) = match read {
        Ok(r) => r,
        Err(why) => {
            return Err(super::formula::Unread(format!(
                "its scalingModifiers formula {shown:?} is not read: {}",
                why.0
            )))
        }
    };
    let weight = |which: Metric| -> f64 {
        signals
            .iter()
            .zip(&w)
            .filter(|((m, _), _)| *m == which)
            .map(|(_, w)| w)
            .sum()
    };
    let (wait, active) = (weight(Metric::Waiting), weight(Metric::Active));
    let metric = if (wait, active, constant) == (1.0, 1.0, 0.0) {
        Metric::Held
    } else {
        Metric::Weighted {
            waiting: wait,
            active,
            constant,
        }
    };
    match target {
        Some(t) if t > 0.0 => Ok((metric, t)),
        _ => Err(super::formula::Unread(
            "its scalingModifiers target is missing or 0 (the API server refuses an \
             average value that is not positive)"
                .into(),
        )),
    }
}

/// An HPA's loop on n8ncap's external metric (`n8n_queue_jobs_held`, an average value per pod),
/// every 15 s (the controller's sync period).
fn hpa_control(v: &Value, object: &str, (min, max): (u32, u32)) -> Control {
    let mut signals = Vec::new();
    for m in v
        .pointer("/spec/metrics")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = s(m, "/external/metric/name").unwrap_or("");
        let target = m
            .pointer("/external/target/averageValue")
            .and_then(quantity);
        match (s(m, "/type"), name, target) {
            (Some("External"), crate::record::kube::HPA_METRIC, Some(t)) => {
                signals.push((Metric::Held, t))
            }
            (kind, _, _) => {
                return Control::NotReplayed(format!(
                    "its {} metric needs figures the run does not give (a CPU target needs the worker's CPU at its ceiling)",
                    kind.unwrap_or("unknown")
                ))
            }
        }
    }
    if let Some((_, t)) = signals.iter().find(|(_, t)| *t <= 0.0) {
        return Control::NotReplayed(format!(
            "its averageValue is {t}: the API server refuses a target that is not positive"
        ));
    }
    if v.pointer("/spec/targetCPUUtilizationPercentage").is_some() || signals.is_empty() {
        return Control::NotReplayed("it scales on CPU, which the replay does not model".into());
    }
    Control::Replayable(Policy {
        name: object.to_string(),
        poll_s: 15,
        signals,
        min: min.max(1),
        max,
        up: rules(v, "/spec/behavior/scaleUp", true),
        down: rules(v, "/spec/behavior/scaleDown", false),
    })
}
