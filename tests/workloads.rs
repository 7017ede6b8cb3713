//! Real workloads against the simulator: traffic mixes of several workflows, binary uploads,
//! k6-style ramps and regular mode — each measured and diagnosed end to end.

mod common;

use n8ncap::load::profile::Profile;
use n8ncap::sim::{config::Workflows, Stack, StackConfig};
use std::time::Duration;

/// A stack with a second webhook, `notify`, whose workflow has no Code node.
async fn stack_with_notify(c: u32, r: u32) -> Stack {
    let mut workflows = Workflows::default();
    workflows
        .add(r#"notify={"code": false}"#)
        .expect("a valid workflow");
    Stack::start(StackConfig {
        worker_concurrency: c,
        runner_limit: r,
        queue_metrics_interval: Duration::from_secs(1),
        workflows,
        ..Default::default()
    })
    .await
    .expect("stack starts")
}

fn mix_profile(origin: &str, code_weight: u32, other_weight: u32, vus: &[u32], ms: u64) -> Profile {
    let stages: Vec<String> = vus.iter().map(|v| format!("{{vus: {v}}}")).collect();
    let text = format!(
        "model: closed\nrequest: {{url: {origin}, timeout: 30s}}\nwarmup: 1s\nstage_duration: 4s\n\
         stages: [{}]\nscenarios:\n\
         - {{name: code, weight: {code_weight}, request: {{url: /webhook/load, body: {{sleep_ms: {ms}}}}}}}\n\
         - {{name: notify, weight: {other_weight}, request: {{url: /webhook/notify, body: {{sleep_ms: {ms}}}}}}}\n",
        stages.join(", ")
    );
    Profile::parse(&text, "mix-test").expect("the mix profile parses")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_70_30_mix_reports_per_scenario_figures_that_add_up_to_the_total() {
    let stack = stack_with_notify(10, 10).await;
    let p = mix_profile(&stack.main_url, 30, 70, &[8], 100);
    let s = common::sweep(p, None).await;
    let st = &s.stages[0];
    assert_eq!(st.scenarios.len(), 2);
    let (code, notify) = (&st.scenarios[0], &st.scenarios[1]);
    assert_eq!(code.requests + notify.requests, st.requests);
    assert_eq!(code.ok + notify.ok, st.ok);
    assert!(
        (code.throughput_rps + notify.throughput_rps - st.throughput_rps).abs() < 1e-9,
        "{} + {} vs {}",
        code.throughput_rps,
        notify.throughput_rps,
        st.throughput_rps
    );
    assert!(
        (code.request_rate + notify.request_rate - st.request_rate).abs() < 1e-9,
        "request rates"
    );
    assert_eq!(code.bytes_sent + notify.bytes_sent, st.bytes_sent);
    assert_eq!(
        code.bytes_received + notify.bytes_received,
        st.bytes_received
    );
    // Iterations are scheduled by weight: 30 / 70 to within a few requests.
    assert!((code.share - 0.3).abs() < 0.03, "code share {}", code.share);
    assert!(st.valid, "{:?}", st.invalid_reasons);
    assert_eq!(code.checks.len(), 2);
    assert_eq!(st.checks.len(), 4);
    assert_eq!(code.error_rate, 0.0);
    // The Code workflow answers that it ran Code; the other that it did not.
    assert_eq!(s.scenarios.len(), 2);
    assert_eq!(s.scenarios[1].share, 0.7);
}
