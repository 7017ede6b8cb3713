//! Containers that died during the run: OOM kills, exits and restarts, read from the lifecycle
//! events the observer recorded per stage. A capacity component that died explains the run
//! before any ceiling does, so these findings outrank the throughput verdict and the levels it
//! touched are left out of the judgement (their figures describe no one deployment). Also what
//! a Code task takes in the runner (per-task peak and idle base), which sizes the runner's
//! memory limit.
//!
//! Not here: following the events (`observe::watch`), the memory plan (`recommend::memory`).

use crate::findings::{Finding, FindingId, Severity};
use crate::model::n8n_defaults;
use crate::model::settings::Provenance;
use crate::model::settings::{Settings, Sourced};
use crate::record::diagnosis::{ContainerDeath, DeathKind, Level, RunnerMemory};
use crate::record::lifecycle::LifecycleAction;
use crate::record::stage::ContainerObserved;
use crate::record::{Role, StageResult};

const MIB: f64 = 1024.0 * 1024.0;

/// Runners' growth under which a stage says nothing about per-task memory (allocator noise,
/// a runner's own warm-up).
const MIN_GROWTH_MIB: f64 = 16.0;

/// Headroom over tasks × per-task peak + base in a proposed memory limit: the peak is a
/// sampled one, and the garbage collector frees late.
pub const MEMORY_HEADROOM: f64 = 1.25;

fn capacity_role(r: Role) -> bool {
    matches!(r, Role::Runner | Role::Worker | Role::Main | Role::Webhook)
}

/// Every container that died, exited or restarted, once, at the first stage it happened in.
/// A removed container (`destroy`) is `container-gone`'s, not counted here.
pub fn deaths(stages: &[StageResult], settings: &Settings) -> Vec<ContainerDeath> {
    let mut out: Vec<ContainerDeath> = Vec::new();
    for s in stages {
        for c in &s.containers {
            let removed = c
                .events
                .iter()
                .any(|e| e.action == LifecycleAction::Destroy);
            if removed || out.iter().any(|d| d.name == c.name) {
                continue;
            }
            let Some(kind) = kind_of(c) else { continue };
            let first = c
                .events
                .iter()
                .find(|e| matches!(e.action, LifecycleAction::Oom | LifecycleAction::Die))
                .or_else(|| c.events.first());
            out.push(ContainerDeath {
                name: c.name.clone(),
                role: c.role,
                attached_to: c.attached_to.clone(),
                kind,
                stage: s.index,
                at_s: first.map_or(0.0, |e| e.at_s),
                exit_code: c.events.iter().find_map(|e| e.exit_code),
                came_back: came_back(stages, s.index, &c.name),
                redis_lost: c.events.iter().any(|e| e.redis_lost),
                memory_limit_bytes: c.memory_limit_bytes,
                memory_last_bytes: c.memory_last_bytes,
                memory_peak_bytes: c.memory_peak_bytes,
                memory_baseline_bytes: c.memory_baseline_bytes,
                runner_limit: c.runner_limit,
                tasks_held: (c.role == Role::Runner)
                    .then(|| tasks_held(s, c, settings))
                    .flatten(),
            });
        }
    }
    out.sort_by_key(|d| (!d.redis_lost, d.kind, d.stage));
    out
}

fn kind_of(c: &ContainerObserved) -> Option<DeathKind> {
    if c.oom_killed {
        Some(DeathKind::OomKilled)
    } else if c.restarted > 0 {
        Some(DeathKind::Restarted)
    } else if c.exited {
        Some(DeathKind::Exited)
    } else {
        None
    }
}

/// Running again by the end of the run: a start after the death, or up when a later stage
/// ended.
fn came_back(stages: &[StageResult], from: usize, name: &str) -> bool {
    let mine = stages
        .iter()
        .filter(|s| s.index >= from)
        .filter_map(|s| s.containers.iter().find(|c| c.name == name));
    let mut back = false;
    for c in mine {
        for e in &c.events {
            match e.action {
                LifecycleAction::Start => back = true,
                LifecycleAction::Die => back = false,
                _ => {}
            }
        }
        back = back || !c.down_at_end;
    }
    back
}

/// The Code tasks a runner held: its worker's share of the executions in flight, split over
/// the worker's runners, at most the runner's limit. A runner of main takes no webhook
/// executions in queue mode.
fn tasks_held(s: &StageResult, c: &ContainerObserved, settings: &Settings) -> Option<Sourced<f64>> {
    let in_flight = match (s.vus, s.rate) {
        (Some(n), _) => n as f64,
        (None, Some(r)) => {
            let job = settings.job_time.as_ref().map_or(1.0, |j| j.value);
            (r * job).min(s.max_vus.map_or(f64::INFINITY, f64::from))
        }
        _ => return None,
    };
    let parent = c
        .attached_to
        .as_ref()
        .and_then(|w| s.containers.iter().find(|o| &o.name == w));
    if parent.is_some_and(|p| p.role == Role::Main) && !settings.is_regular() {
        return None;
    }
    let workers = s
        .containers
        .iter()
        .filter(|o| o.role == Role::Worker)
        .count()
        .max(settings.worker_count() as usize * usize::from(s.containers.is_empty()))
        .max(1) as f64;
    let siblings = s
        .containers
        .iter()
        .filter(|o| {
            o.role == Role::Runner && o.attached_to.is_some() && o.attached_to == c.attached_to
        })
        .count()
        .max(1) as f64;
    let mut on_worker = in_flight / workers;
    if let Some(wc) = &settings.worker_concurrency {
        on_worker = on_worker.min(wc.value as f64);
    }
    let mut tasks = on_worker / siblings;
    let mut why = format!(
        "{in_flight:.0} in flight over {workers:.0} worker(s){}",
        if siblings > 1.0 {
            format!(", {siblings:.0} runners on its worker")
        } else {
            String::new()
        }
    );
    if let Some(l) = c.runner_limit {
        if (l as f64) < tasks {
            tasks = l as f64;
            why.push_str(&format!(", at most its limit {l}"));
        }
    }
    Some(Sourced::new(tasks, Provenance::Inferred(why)))
}

/// Levels a capacity container's death touched: the level it died in, and the later ones
/// while it stayed down. Left out of the judgement.
pub fn mark_levels(levels: &mut [Level], deaths: &[ContainerDeath], stages: &[StageResult]) {
    for d in deaths.iter().filter(|d| capacity_role(d.role)) {
        let down_until = if d.came_back {
            d.stage
        } else {
            stages.iter().map(|s| s.index).max().unwrap_or(d.stage)
        };
        for l in levels.iter_mut() {
            let touched = l
                .stages
                .iter()
                .filter_map(|i| stages.get(*i))
                .any(|s| s.index >= d.stage && s.index <= down_until);
            if touched && l.stack_changed.is_none() {
                l.stack_changed = Some(format!(
                    "{} {} {} in stage {}{}",
                    d.role.word(),
                    d.name,
                    d.kind.words(),
                    d.stage + 1,
                    if d.came_back {
                        String::new()
                    } else {
                        format!(" and stayed down{}", served(d))
                    }
                ));
                l.valid = false;
            }
        }
    }
}

fn served(d: &ContainerDeath) -> String {
    match (&d.attached_to, d.role) {
        (Some(w), Role::Runner) => format!(": {w} ran without this runner"),
        _ => String::new(),
    }
}

impl DeathKind {
    pub fn words(&self) -> &'static str {
        match self {
            DeathKind::OomKilled => "was OOM-killed",
            DeathKind::Exited => "exited",
            DeathKind::Restarted => "restarted",
        }
    }
}

/// The sentence the verdict starts with when an n8n process gave Redis up.
fn redis_prefix(d: &ContainerDeath) -> String {
    let after = if d.came_back {
        "a restart policy started it again; the stages it missed are left out"
    } else {
        "nothing started it again (no restart policy): from then on nothing was answered"
    };
    format!(
        "{} {} exited in stage {} at {:.1} s because Redis was gone for longer than QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD (10 s by default; n8n's \"Exiting process due to Redis connection error\"): the requests it held got no answer, and {after}. The stages before it were measured on the whole stack. ",
        capitalised(d.role.word()),
        d.name,
        d.stage + 1,
        d.at_s
    )
}

/// The sentence the verdict starts with when a capacity component died.
pub fn verdict_prefix(deaths: &[ContainerDeath], timeout_s: f64) -> Option<String> {
    if let Some(d) = deaths.iter().find(|d| d.redis_lost) {
        return Some(redis_prefix(d));
    }
    let d = deaths.iter().find(|d| capacity_role(d.role))?;
    let role = capitalised(d.role.word());
    let of = match (&d.attached_to, d.role) {
        (Some(w), Role::Runner) => format!(" (of {w})"),
        _ => String::new(),
    };
    let mut held = Vec::new();
    if let Some(l) = d.memory_limit_bytes {
        held.push(format!("memory limit {:.0} MiB", l as f64 / MIB));
    }
    if d.kind == DeathKind::OomKilled || d.memory_last_bytes > 0.0 {
        held.push(format!(
            "last seen at {:.0} MiB",
            d.memory_last_bytes.max(d.memory_peak_bytes) / MIB
        ));
    }
    if let Some(t) = &d.tasks_held {
        held.push(format!("≈ {:.0} tasks held", t.value));
    }
    let what = if held.is_empty() {
        String::new()
    } else {
        format!(" ({})", held.join(", "))
    };
    let after = match (d.role, &d.attached_to, d.came_back) {
        (Role::Runner, Some(w), false) => format!(
            " {w}'s Code tasks then waited for a runner for the task request timeout ({timeout_s:.0} s) and failed."
        ),
        (Role::Runner, _, true) => " The tasks it held failed; it came back.".to_string(),
        (Role::Worker | Role::Main, _, _) => {
            " The executions in flight on it were lost or re-run.".to_string()
        }
        _ => String::new(),
    };
    Some(format!(
        "{role} {}{of} {} in stage {} at {:.1} s{what}.{after} ",
        d.name,
        d.kind.words(),
        d.stage + 1,
        d.at_s
    ))
}

fn capitalised(w: &str) -> String {
    let mut c = w.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

/// Per-task memory and idle base of the runners: measured where a stage's runners grew (their
/// mean memory above the base ÷ the runner tasks running, X × C), else the body's
/// `alloc_mb`, else a lower bound from a kill (memory limit − base over the tasks it held).
pub fn runner_memory(
    stages: &[StageResult],
    settings: &Settings,
    deaths: &[ContainerDeath],
) -> Option<RunnerMemory> {
    let runners: Vec<&ContainerObserved> = stages
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter(|c| c.role == Role::Runner && c.memory_baseline_bytes > 0.0)
        .collect();
    let base = if runners.is_empty() {
        Sourced::new(
            crate::model::n8n_defaults::RUNNER_IDLE_MIB,
            Provenance::Assumed("an idle n8nio/runners container (assumed, not measured)".into()),
        )
    } else {
        let mut names: Vec<&str> = runners.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let mean =
            runners.iter().map(|c| c.memory_baseline_bytes).sum::<f64>() / runners.len() as f64;
        Sourced::new(
            mean / MIB,
            Provenance::Measured(format!("measured before load ({} runner(s))", names.len())),
        )
    };
    if let Some(m) = measured(stages, settings, deaths, &base) {
        return Some(m);
    }
    if let Some(m) = &settings.task_memory_mb {
        return Some(RunnerMemory {
            per_task_mib: m.clone(),
            base_mib: base,
            tasks: None,
            stage: None,
            growth_mib: None,
        });
    }
    let d = deaths.iter().find(|d| {
        d.kind == DeathKind::OomKilled && d.role == Role::Runner && d.memory_limit_bytes.is_some()
    })?;
    let tasks = d.tasks_held.as_ref().filter(|t| t.value >= 1.0)?;
    let limit = d.memory_limit_bytes? as f64 / MIB;
    let per = ((limit - base.value) / tasks.value).max(1.0);
    Some(RunnerMemory {
        per_task_mib: Sourced::new(
            per,
            Provenance::Inferred(format!(
                "at least: {limit:.0} MiB limit less the base over the ≈ {:.0} tasks {} held when killed",
                tasks.value, d.name
            )),
        ),
        base_mib: base,
        tasks: Some(tasks.value),
        stage: Some(d.stage),
        growth_mib: None,
    })
}

/// The stage whose runners grew most, with no runner death in it: growth ÷ (X × C).
fn measured(
    stages: &[StageResult],
    settings: &Settings,
    deaths: &[ContainerDeath],
    base: &Sourced<f64>,
) -> Option<RunnerMemory> {
    let code_s = settings
        .code_time
        .as_ref()
        .or(settings.job_time.as_ref())
        .map(|c| c.value)?;
    let best = stages
        .iter()
        .filter(|s| s.valid && s.throughput_rps > 0.0 && s.ramp.is_none())
        .filter(|s| {
            !deaths
                .iter()
                .any(|d| d.role == Role::Runner && d.stage == s.index)
        })
        .filter_map(|s| per_task_in(s, code_s))
        .max_by(|a, b| a.growth.total_cmp(&b.growth))?;
    Some(RunnerMemory {
        per_task_mib: Sourced::new(best.growth / best.tasks, Provenance::Measured(best.how)),
        base_mib: base.clone(),
        tasks: Some(best.tasks),
        stage: Some(best.stage),
        growth_mib: Some(best.growth),
    })
}

/// One stage's reading of the runners' memory per task.
struct PerTask {
    stage: usize,
    growth: f64,
    tasks: f64,
    how: String,
}

/// The runners' memory above their base over the runner tasks that held it. The tasks running
/// on average are X × C (Little's law), at most min(users in flight, Σ runner limits). When
/// they run at that most for most of the time (X × C ≥ half of it: Code-bound), the peak
/// reading over the most tasks is the measure: memory cannot be above what that many tasks
/// hold, so it is a floor no busy machine moves, while the mean of a few readings of a square
/// wave is as far off as the readings that fell between tasks. Otherwise both sides are the
/// window's averages (mean memory above the base over X × C).
fn per_task_in(s: &StageResult, code_s: f64) -> Option<PerTask> {
    let r = s.memory_by_role.iter().find(|r| r.role == Role::Runner)?;
    let mean = (r.mean_bytes - r.baseline_bytes) / MIB;
    let peak = (r.max_bytes - r.baseline_bytes) / MIB;
    let limits: Vec<u32> = s
        .containers
        .iter()
        .filter(|c| c.role == Role::Runner)
        .filter_map(|c| c.runner_limit)
        .collect();
    let most = match (s.vus.map(f64::from), limits.is_empty()) {
        (Some(n), true) => Some(n),
        (Some(n), false) => Some(n.min(limits.iter().sum::<u32>() as f64)),
        (None, false) => Some(limits.iter().sum::<u32>() as f64),
        (None, true) => None,
    };
    let running = s.throughput_rps * code_s;
    let running = most.map_or(running, |m| running.min(m));
    let at_most = most.filter(|m| *m >= 1.0 && running >= 0.5 * m && peak >= mean);
    let (growth, tasks, how) = match at_most {
        Some(m) => (
            peak,
            m,
            format!(
                "measured: the runners held {peak:.0} MiB above their base at their peak in stage {}, with at most {m:.0} runner tasks running (on average X × C = {running:.1} tasks, {mean:.0} MiB)",
                s.index + 1
            ),
        ),
        None => (
            mean,
            running,
            format!(
                "measured: the runners held {mean:.0} MiB above their base on average over {running:.1} runner tasks running (X × C) in stage {}",
                s.index + 1
            ),
        ),
    };
    (growth >= MIN_GROWTH_MIB && tasks >= 0.5).then_some(PerTask {
        stage: s.index,
        growth,
        tasks,
        how,
    })
}

/// The memory limit that holds `tasks` tasks: ⌈(tasks × per-task + base) × headroom⌉ MiB.
pub fn memory_needed_mib(tasks: f64, m: &RunnerMemory, headroom: f64) -> f64 {
    ((tasks * m.per_task_mib.value + m.base_mib.value) * headroom).ceil()
}

/// Tasks a memory limit holds with the headroom: ⌊(limit ÷ headroom − base) ÷ per-task⌋.
pub fn tasks_within(limit_mib: f64, m: &RunnerMemory) -> u32 {
    let per = m.per_task_mib.value.max(1e-9);
    ((limit_mib / MEMORY_HEADROOM - m.base_mib.value) / per)
        .floor()
        .max(0.0) as u32
}

/// One finding per death, OOM kills first.
pub fn findings(
    deaths: &[ContainerDeath],
    memory: Option<&RunnerMemory>,
    timeout_s: Option<f64>,
    out: &mut Vec<Finding>,
) {
    let timeout = timeout_s.unwrap_or(n8n_defaults::TASK_REQUEST_TIMEOUT_S);
    if let Some(m) = memory.filter(|m| m.growth_mib.is_some()) {
        out.push(
            Finding::new(FindingId::RunnerTaskMemory,
                format!(
                    "Each Code task holds ≈ {:.0} MiB in the runners; a runner holds {:.0} MiB without tasks",
                    m.per_task_mib.value, m.base_mib.value
                ),
            )
            .evidence(m.per_task_mib.source.words())
            .evidence(format!("base: {}", m.base_mib.source))
            .figure("per_task_mib", m.per_task_mib.value)
            .figure("base_mib", m.base_mib.value)
            .figure("tasks", m.tasks.unwrap_or(0.0))
            .why("A runner's memory limit must hold N8N_RUNNERS_MAX_CONCURRENCY tasks at this peak plus its base, or the kernel kills it under load.")
            .fix("set each runner's memory limit to N8N_RUNNERS_MAX_CONCURRENCY × the per-task peak + the base, with headroom (the recommendation gives the figure)"),
        );
    }
    for d in deaths {
        let f = match d.kind {
            DeathKind::OomKilled => oom(d, memory, timeout),
            _ if d.redis_lost => redis_lost(d),
            DeathKind::Exited => exited(d),
            DeathKind::Restarted => restarted(d),
        };
        out.push(
            f.subject(d.name.clone())
                .figure("stage", (d.stage + 1) as f64)
                .figure("at_s", d.at_s),
        );
    }
}

fn oom(d: &ContainerDeath, memory: Option<&RunnerMemory>, timeout: f64) -> Finding {
    let id = match d.role {
        Role::Runner => FindingId::RunnerOomKilled,
        Role::Worker => FindingId::WorkerOomKilled,
        Role::Main | Role::Webhook => FindingId::MainOomKilled,
        _ => FindingId::ContainerOomKilled,
    };
    let limit_mib = d.memory_limit_bytes.map(|l| l as f64 / MIB);
    let mut f = Finding::new(
        id,
        format!(
            "{} {} was OOM-killed in stage {} at {:.1} s{}",
            capitalised(d.role.word()),
            d.name,
            d.stage + 1,
            d.at_s,
            limit_mib
                .map(|l| format!(": its {l:.0} MiB memory limit was reached"))
                .unwrap_or_default()
        ),
    )
    .figure("memory_last_mib", d.memory_last_bytes / MIB)
    .figure("memory_peak_mib", d.memory_peak_bytes / MIB)
    .figure("memory_baseline_mib", d.memory_baseline_bytes / MIB);
    if let Some(l) = limit_mib {
        f = f.figure("memory_limit_mib", l);
    }
    f = f.evidence(format!(
        "Docker: State.OOMKilled, exit code {}; last memory reading {:.0} MiB (peak {:.0} MiB, {:.0} MiB before load){}",
        d.exit_code.map_or("?".into(), |c| c.to_string()),
        d.memory_last_bytes / MIB,
        d.memory_peak_bytes / MIB,
        d.memory_baseline_bytes / MIB,
        limit_mib.map(|l| format!(", limit {l:.0} MiB")).unwrap_or_default()
    ));
    if d.role != Role::Runner {
        return f
            .why("The executions in flight on it are lost or re-run, and the stack runs without it until it restarts.")
            .fix("raise its memory limit, or lower the executions it holds at once (worker concurrency)");
    }
    if let Some(w) = &d.attached_to {
        f = f.evidence(format!("runner of {w}"));
    }
    if let Some(t) = &d.tasks_held {
        f = f
            .evidence(format!("≈ {:.1} Code tasks held ({})", t.value, t.source))
            .figure("tasks_held", t.value);
    }
    if let Some(m) = memory {
        f = f
            .evidence(format!(
                "per task {:.0} MiB ({}), base {:.0} MiB ({})",
                m.per_task_mib.value, m.per_task_mib.source, m.base_mib.value, m.base_mib.source
            ))
            .figure("per_task_mib", m.per_task_mib.value)
            .figure("base_mib", m.base_mib.value);
    }
    f = f.evidence(if d.came_back {
        "it started again: the tasks it held failed, later ones ran on the new process".to_string()
    } else {
        format!(
            "it stayed down: every Code task of {} then waited for a runner until N8N_RUNNERS_TASK_REQUEST_TIMEOUT ({timeout:.0} s) and failed",
            d.attached_to.as_deref().unwrap_or("its worker")
        )
    });
    f = f.why("Code-node memory lands in the runner, not the worker: a runner's memory limit must hold its concurrent tasks × their peak plus its base, or the kernel kills it and the worker's Code tasks wait for a runner that is gone.");
    runner_fix(f, d, memory, limit_mib)
}

/// A killed runner's change: the memory limit its tasks need (tasks × per-task peak + base,
/// with headroom), or the tasks its limit holds; the generic change without the figures.
fn runner_fix(
    f: Finding,
    d: &ContainerDeath,
    memory: Option<&RunnerMemory>,
    limit_mib: Option<f64>,
) -> Finding {
    let (Some(m), Some(limit)) = (memory, limit_mib) else {
        return f.fix("raise the runner's memory limit (mem_limit, resources.limits.memory) to tasks × per-task peak + base, or lower N8N_RUNNERS_MAX_CONCURRENCY");
    };
    let tasks = d
        .runner_limit
        .map(f64::from)
        .or(d.tasks_held.as_ref().map(|t| t.value))
        .unwrap_or(1.0);
    let held = d.tasks_held.as_ref().map_or(tasks, |t| t.value);
    let needed = memory_needed_mib(held, m, 1.0);
    let proposed = memory_needed_mib(tasks, m, MEMORY_HEADROOM);
    let fit = tasks_within(limit, m);
    f.figure("needed_mib", needed)
        .figure("proposed_limit_mib", proposed)
        .figure("tasks_within_limit", fit as f64)
        .fix(format!(
            "set the runner's memory limit to at least {proposed:.0} MiB ({tasks:.0} tasks × {:.0} MiB + {:.0} MiB base, +{:.0} % headroom; {needed:.0} MiB held the {held:.0} tasks of this run), or keep {limit:.0} MiB and set N8N_RUNNERS_MAX_CONCURRENCY={} on it{}",
            m.per_task_mib.value,
            m.base_mib.value,
            (MEMORY_HEADROOM - 1.0) * 100.0,
            fit.max(1),
            if fit == 0 { " (not even one task fits: raise the limit)" } else { "" }
        ))
}

fn exited(d: &ContainerDeath) -> Finding {
    let sev = if capacity_role(d.role) {
        Severity::Error
    } else {
        Severity::Warning
    };
    Finding::new(
        FindingId::ContainerExited,
        format!(
            "{} {} exited{} in stage {} at {:.1} s{}",
            capitalised(d.role.word()),
            d.name,
            d.exit_code.map(|c| format!(" with code {c}")).unwrap_or_default(),
            d.stage + 1,
            d.at_s,
            if d.came_back { " and came back" } else { " and stayed down" }
        ),
    )
    .evidence(format!(
        "last memory reading {:.0} MiB; exit code {} (137: SIGKILL without an OOM kill, 143: SIGTERM)",
        d.memory_last_bytes / MIB,
        d.exit_code.map_or("?".into(), |c| c.to_string())
    ))
    .why("A process of the deployment ended under load: the stages from then on ran on a smaller stack.")
    .fix("read its logs (docker logs) for why it ended; a restart policy brings it back, but what it held is lost")
    .with_severity(sev)
}

fn redis_lost(d: &ContainerDeath) -> Finding {
    Finding::new(
        FindingId::RedisConnectionLost,
        format!(
            "{} {} gave Redis up and exited in stage {} at {:.1} s{}",
            capitalised(d.role.word()),
            d.name,
            d.stage + 1,
            d.at_s,
            if d.came_back {
                " and was started again"
            } else {
                " and stayed down"
            }
        ),
    )
    .evidence("its log ends with n8n's \"Exiting process due to Redis connection error\"".to_string())
    .evidence(format!(
        "exit code {}",
        d.exit_code.map_or("?".into(), |c| c.to_string())
    ))
    .why("n8n retries a lost Redis every second and exits once it has tried for longer than QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD (10 000 ms): the webhooks it held get no answer, and nothing is answered until something starts it again.")
    .fix("find why Redis went away (its logs, its memory, its host) and keep it up; set restart: always on every n8n service; n8ncap outage measures what an outage of a given length costs")
    .with_severity(Severity::Error)
}

fn restarted(d: &ContainerDeath) -> Finding {
    Finding::new(FindingId::ContainerRestarted,
        format!(
            "{} {} restarted in stage {} at {:.1} s",
            capitalised(d.role.word()),
            d.name,
            d.stage + 1,
            d.at_s
        ),
    )
    .evidence(format!(
        "exit code {}; its CPU and memory counters started again with the new process: no figure spans the restart",
        d.exit_code.map_or("?".into(), |c| c.to_string())
    ))
    .why("What the container held when it restarted was lost, and the stage mixes two processes' figures.")
    .fix("find why it restarted (docker logs, docker inspect State); re-run the stage once it stays up")
}

#[cfg(test)]
mod tests;
