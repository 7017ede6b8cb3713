use super::*;
use crate::diagnose::tests::{closed, run, settings};

#[test]
fn matchers_are_label_matchers_or_refused() {
    assert_eq!(
        check_matcher(r#"namespace="n8n""#).unwrap(),
        ("namespace".into(), "=".into(), "n8n".into())
    );
    assert_eq!(check_matcher(r#" service =~ "n8n.*" "#).unwrap().1, "=~");
    assert_eq!(check_matcher(r#"a!="x\"y""#).unwrap().2, r#"x\"y"#);
    for bad in [
        "namespace",
        r#"1a="x""#,
        r#"a="x"y""#,
        r#"a="x"#,
        "a=x",
        "a=\"x\ny\"",
        r#"a="x\""#,
        r#"a~"x""#,
        r#"a="x"} or vector(1) # "#,
        // Beside the rules' own job and metric name, they would select nothing.
        r#"job="n8n""#,
        r#"__name__=~"n8n_.*""#,
        // Not a regex Prometheus takes.
        r#"a=~"(x""#,
        r#"a!~"*x""#,
    ] {
        assert!(check_matcher(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn a_small_threshold_keeps_its_digits_and_never_rounds_to_zero() {
    assert_eq!(num(1e-9), "0.000000001");
    assert_eq!(num(0.000123456789), "0.0001234568");
    assert_eq!(num(3.29293), "3.29293");
    assert_eq!(num(0.5), "0.5");
    assert_eq!(num(120.0), "120");
}

fn measured(d: &Diagnosis) -> Basis<'_> {
    Basis {
        diagnosis: d,
        from: "run".into(),
        job_p99_s: 2.0,
        caller_timeout_s: (30.0, false),
        matchers: vec![r#"namespace="n8n""#.into()],
        postgres_usable: Some((97, "max_connections 100 − 3 reserved".into())),
    }
}

/// The thresholds are the measured ceiling's shares; every selector carries the matchers.
#[test]
fn thresholds_come_from_the_ceiling_and_selectors_carry_the_matchers() {
    let d = run(
        &[closed(0, 1, 1.0 / 1.05), closed(1, 40, 20.0)],
        settings(1.0, Some(10), Some(10)),
    );
    let x = d.measured_ceiling.as_ref().unwrap().mean;
    let p = plan(&measured(&d)).unwrap();
    let value = |name: &str| {
        p.thresholds
            .iter()
            .find(|t| t.name.starts_with(name))
            .unwrap()
            .value
    };
    assert!((value("operating point") - x * 2.0 / 3.0).abs() < 1e-9);
    assert!((value("near the ceiling") - 0.9 * x).abs() < 1e-9);
    assert_eq!(value("queue wait"), 28.0);
    assert_eq!(value("Postgres"), 97.0);
    let exprs: Vec<&String> = p
        .rules
        .groups
        .iter()
        .flat_map(|g| &g.rules)
        .map(|r| match r {
            Rule::Record { expr, .. } | Rule::Alert { expr, .. } => expr,
        })
        .collect();
    for e in exprs
        .iter()
        .filter(|e| e.contains("n8n_") || e.contains("up{"))
    {
        assert!(e.contains(r#"namespace="n8n""#), "{e}");
    }
    let op = exprs
        .iter()
        .find(|e| e.starts_with(names::COMPLETED) && e.contains('>'))
        .unwrap();
    assert_eq!(
        *op,
        &format!("{} > {}", names::COMPLETED, num(x * 2.0 / 3.0))
    );
}

#[test]
fn a_run_without_a_ceiling_gives_no_rules() {
    let d = run(
        &[closed(0, 1, 1.0 / 1.05)],
        settings(1.0, Some(10), Some(10)),
    );
    assert!(d.measured_ceiling.is_none());
    assert!(plan(&measured(&d)).is_err());
}
