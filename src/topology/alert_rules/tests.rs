use super::*;

#[test]
fn thresholds_above_are_read_outside_matchers_and_strings() {
    assert_eq!(
        threshold_above("sum(n8n_scaling_mode_queue_jobs_waiting{job=\"a>1\"}) > 1000"),
        Some(1000.0)
    );
    assert_eq!(threshold_above("rate(x[5m]) >= 2.5e1"), Some(25.0));
    assert_eq!(threshold_above("x > bool 3"), Some(3.0));
    assert_eq!(threshold_above("x < 3"), None);
    assert_eq!(threshold_above("x > y"), None);
}

#[test]
fn a_rules_file_and_a_prometheus_rule_give_their_alerts_and_other_yaml_is_refused() {
    let file = "groups:\n- name: n8n\n  rules:\n  - record: r\n    expr: sum(x)\n  - alert: Backlog\n    expr: sum(n8n_scaling_mode_queue_jobs_waiting) > 1000\n    for: 5m\n";
    let a = read("rules.yml", file).unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].name, "Backlog");
    assert!(a[0].origin.contains("group n8n"));
    let crd = "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: n}\nspec:\n  groups:\n  - name: g\n    rules:\n    - alert: A\n      expr: up == 0\n    - alert: B\n      expr: x > 2\n";
    assert_eq!(read("r.yaml", crd).unwrap().len(), 2);
    assert!(read("c.yml", "services:\n  n8n: {image: n8nio/n8n}\n").is_err());
}
