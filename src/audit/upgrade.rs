//! `audit --upgrade 3.0`: what n8n 3.0 changes in a deployment's capacity settings, read from
//! the whole deployment (compose files, manifests or live containers) where n8n's own Migration
//! Report sees only its instance's environment. Each rule is a change n8n documents in "n8n 3.0
//! breaking changes" (docs.n8n.io/changelog/v30-breaking-changes, section Configuration):
//! - `N8N_RUNNERS_TASK_TIMEOUT`'s default drops from 300 s to 60 s: Code tasks that run longer
//!   fail;
//! - `OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS` is removed: in queue mode manual executions always
//!   run on workers (their slots and memory) — a change where main ran them (the variable not
//!   true, 2.x's default);
//! - `N8N_DB_PING_TIMEOUT` is removed, with no fallback: `DB_PING_TIMEOUT_MS` replaces it;
//! - `N8N_DEFAULT_BINARY_DATA_MODE=default` (in memory) is no longer valid: n8n switches to
//!   `filesystem`.
//!
//! The removal of the internal runner mode that has been announced elsewhere is not on that
//! page, so no rule claims it.

use super::{env, finding, Ctx};
use crate::findings::{Finding, FindingId};
use crate::model::Upgrade;
use crate::topology::Role;

/// n8n 2.x's `N8N_RUNNERS_TASK_TIMEOUT` default, and 3.0's, seconds.
const TASK_TIMEOUT_2X_S: u64 = 300;
const TASK_TIMEOUT_3_S: u64 = crate::model::n8n_defaults::TASK_TIMEOUT_3_S as u64;

pub(super) fn rules(c: &Ctx, upgrade: Upgrade, out: &mut Vec<Finding>) {
    match upgrade {
        Upgrade::V3 => v3(c, out),
    }
}

fn v3(c: &Ctx, out: &mut Vec<Finding>) {
    task_timeout(c, out);
    for n in c.n8n.iter().copied() {
        // Main decides where manual executions run: today on main unless the variable is true
        // (2.x's default false); in 3.0 always on the workers.
        let queue = n
            .executions_mode
            .as_ref()
            .is_some_and(|m| m.value == crate::model::settings::ExecutionsMode::Queue);
        let offload = env(n, "OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS");
        // n8n's boolean (topology::n8n_env): TRUE, True and 1 are true; anything else keeps
        // the default, false.
        let offloaded = offload.and_then(crate::topology::n8n_env::boolean) == Some(true);
        if n.role == Role::Main && queue && !offloaded {
            out.push(
                finding(FindingId::UpgradeManualExecutionsOnWorkers, n.name(), format!(
                    "{}: manual executions run on main today (OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS {}); n8n 3.0 removes the variable and runs them on the workers",
                    n.name(),
                    offload.map_or("unset: false".to_string(), |v| format!("={v}"))
                ))
                .why("After the upgrade every manual execution takes a worker slot and worker memory, as production executions do: the slots production load had are shared with editors' test runs.")
                .fix(format!("size worker slots and memory for manual executions too, and remove OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS from {} when upgrading", n.name())),
            );
        }
        let names = &n.facts.env_names;
        if names.iter().any(|v| v == "N8N_DB_PING_TIMEOUT")
            && !names.iter().any(|v| v == "DB_PING_TIMEOUT_MS")
        {
            out.push(
                finding(FindingId::UpgradeDbPingTimeoutRenamed, n.name(), format!(
                    "{}: N8N_DB_PING_TIMEOUT is no longer read in n8n 3.0 (no fallback): the database ping falls back to its default",
                    n.name()
                ))
                .why("A ping timeout raised for a busy connection pool silently returns to the default, and n8n may declare a healthy but busy database dead.")
                .fix(format!("set DB_PING_TIMEOUT_MS on {} (in milliseconds)", n.name())),
            );
        }
        if env(n, "N8N_DEFAULT_BINARY_DATA_MODE") == Some("default") {
            out.push(
                finding(FindingId::UpgradeBinaryDataModeDefault, n.name(), format!(
                    "{}: N8N_DEFAULT_BINARY_DATA_MODE=default (in memory) is no longer valid in n8n 3.0: it switches to filesystem",
                    n.name()
                ))
                .why("Binary data moves from memory to the container's disk on upgrade; in queue mode a worker cannot read a file another process wrote.")
                .fix(format!("set N8N_DEFAULT_BINARY_DATA_MODE on {} to database or s3 (queue mode), or filesystem with a volume that has room", n.name())),
            );
        }
    }
}

/// Where Code runs — an external runner, or an n8n process with its internal runner — and
/// `N8N_RUNNERS_TASK_TIMEOUT` is not set: 300 s today, 60 s after the upgrade.
fn task_timeout(c: &Ctx, out: &mut Vec<Finding>) {
    let internal = c.n8n.iter().copied().filter(|n| {
        n.runners_mode
            .as_ref()
            .is_some_and(|m| m.value == crate::topology::RunnersMode::Internal)
            && n.role != Role::Webhook
    });
    for n in c.runners.iter().copied().chain(internal) {
        if env(n, "N8N_RUNNERS_TASK_TIMEOUT").is_some() {
            continue;
        }
        out.push(
            finding(FindingId::UpgradeTaskTimeout, n.name(), format!(
                "{}: N8N_RUNNERS_TASK_TIMEOUT is not set: its default drops from {TASK_TIMEOUT_2X_S} s to {TASK_TIMEOUT_3_S} s in n8n 3.0, and Code tasks that run longer fail",
                n.name()
            ))
            .evidence("no measured Code time was given to this audit: a sweep or a Prometheus history of this deployment tells whether any task runs longer than 60 s (the p99 of the job time, n8ncap diagnose)")
            .why("Nothing in the deployment changes, yet after the upgrade a Code node that takes more than a minute is stopped and its execution fails.")
            .fix(format!("set N8N_RUNNERS_TASK_TIMEOUT on {} to what the longest Code task needs (e.g. {TASK_TIMEOUT_2X_S} to keep today's)", n.name())),
        );
    }
}
