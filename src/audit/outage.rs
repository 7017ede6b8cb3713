//! What a Redis outage does to the deployment, read from its configuration: n8n 2.x's processes
//! retry a lost Redis every second and exit once it was gone for
//! `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD` (10 000 ms); only a supervisor starts them again. Measured
//! on n8n 2.41.1: main and a worker exited 10 s after Redis stopped, their webhooks in flight got
//! no answer, and every later request was refused — also after Redis was back.

use super::{finding, mode_of, Ctx};
use crate::findings::{Finding, FindingId};
use crate::model::settings::{ExecutionsMode, Sourced};
use crate::topology::{Node, ProbeKind, Role};

pub(super) fn rules(c: &Ctx, out: &mut Vec<Finding>) {
    let queue: Vec<&Node> = c
        .n8n
        .iter()
        .copied()
        .filter(|n| mode_of(n).0 == Some(ExecutionsMode::Queue))
        .collect();
    let Some(first) = queue.first() else {
        return;
    };
    for n in &queue {
        n8n_restart(n, out);
    }
    let redis: Vec<&Node> = c.t.nodes.iter().filter(|n| n.role == Role::Redis).collect();
    for r in &redis {
        redis_restart(r, out);
    }
    threshold(first, &redis, out);
}

/// The process's `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD`, ms, with where it came from.
fn threshold_of(n: &Node) -> Option<&Sourced<f64>> {
    n.times.as_ref().and_then(|t| t.redis_timeout_ms.as_ref())
}

fn threshold_words(n: &Node) -> String {
    match threshold_of(n) {
        Some(t) => format!(
            "QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD {:.0} ms, {}",
            t.value,
            t.source.words()
        ),
        None => "QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD, n8n's 10 000 ms".into(),
    }
}

fn restarts(n: &Node) -> bool {
    n.facts.restart.as_ref().is_some_and(|r| r.restarts)
}

fn restart_words(n: &Node) -> String {
    match &n.facts.restart {
        Some(r) => format!("{}: {}", r.at, r.written),
        None => "no restart policy written (Compose's and Docker's default: no)".into(),
    }
}

fn n8n_restart(n: &Node, out: &mut Vec<Finding>) {
    if restarts(n) {
        return;
    }
    out.push(
        finding(
            FindingId::ProcessWithoutRestartPolicy,
            n.name(),
            format!(
                "{}: nothing restarts this {} ({}) — once Redis is unreachable for {} it exits and stays down",
                n.name(),
                n.role.word(),
                restart_words(n),
                threshold_words(n)
            ),
        )
        .why("n8n retries a lost Redis every second and exits after QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD; its webhooks in flight get no answer and every later request is refused, also after Redis is back, until something starts it again (measured on n8n 2.41.1: main and a worker exited 10 s after Redis stopped).")
        .fix(format!(
            "set restart: always (or unless-stopped) on {}, as n8n's own compose examples do",
            n.name()
        )),
    );
}

fn redis_restart(r: &Node, out: &mut Vec<Finding>) {
    if restarts(r) || r.facts.replicas > 1 {
        return;
    }
    out.push(
        finding(
            FindingId::RedisWithoutRestartPolicy,
            r.name(),
            format!(
                "{}: the queue's Redis is one container and nothing restarts it ({})",
                r.name(),
                restart_words(r)
            ),
        )
        .why("When it stops (a crash, an OOM kill, a host reboot) every n8n process exits after QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD, and the queue stays gone until someone starts it.")
        .fix(format!(
            "set restart: always (or unless-stopped) on {}",
            r.name()
        )),
    );
}

/// The threshold against what restarts Redis, where the input says it.
fn threshold(n: &Node, redis: &[&Node], out: &mut Vec<Finding>) {
    let ms = threshold_of(n)
        .map(|t| t.value)
        .unwrap_or(crate::model::n8n_defaults::REDIS_TIMEOUT_THRESHOLD_MS);
    let liveness = redis.iter().find_map(|r| {
        r.facts.k8s.as_ref()?.probes.iter().find_map(|p| {
            (p.kind == ProbeKind::Liveness)
                .then_some(p.acts_after_s)
                .flatten()
                .map(|s| (r.name(), s))
        })
    });
    // Said where Redis' own restart time is known; elsewhere the threshold is in the error above.
    let Some((name, s)) = liveness else {
        return;
    };
    let against = if s * 1000.0 > ms {
        format!(
            "; {name}'s liveness probe restarts it only after {s:.0} s of failures — longer than the threshold: a hung Redis restarts every n8n process first"
        )
    } else {
        format!("; {name}'s liveness probe restarts it after {s:.0} s of failures, within the threshold")
    };
    out.push(
        finding(
            FindingId::RedisTimeoutThreshold,
            n.name(),
            format!(
                "n8n's processes exit {:.0} s after Redis goes away ({}){against}",
                ms / 1000.0,
                threshold_words(n)
            ),
        )
        .why("n8n's Redis client exits the process once it has tried a lost Redis for longer than QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD; what Redis takes to come back decides whether an outage costs the requests in flight or every process.")
        .fix("keep Redis' restart or failover under the threshold (n8ncap outage measures it), or raise QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD above it on every n8n process".to_string()),
    );
}
