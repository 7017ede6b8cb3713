//! One file per limit kind: each says its bound from the settings and the job, when it binds and
//! its finding with the evidence, what raises it, and its setting lines in each config dialect.
//! The verdict (`diagnose::verdict`), the plan (`recommend`) and the settings snippets
//! (`report::dialect`) choose among the kinds through [`Kind`] and never name one; [`of`] is the
//! one place a `Limit` becomes its file, so a new variant is answered there and in its own file.

pub mod cpu;
pub mod db_pool;
pub mod pair;
pub mod production;
pub mod runner_tasks;
pub mod worker_slots;

use crate::error::NoPlan;
use crate::findings::Finding;
use crate::model::mix::KindUse;
use crate::model::settings::{Settings, Sourced};
use crate::model::{Bound, Capacity, Job, Limit};
use crate::record::diagnosis::{CpuUse, Diagnosis, Level};
use crate::record::{Estimate, StageResult};

/// What the verdict step knows of the ceiling a run reached.
pub struct Ceiling<'a> {
    /// Capacity: throughput at the saturated levels.
    pub x: &'a Estimate,
    /// Where it was measured (the level of the highest throughput at the ceiling).
    pub level: &'a Level,
    /// The smallest level at the ceiling: what "from N in flight on" names.
    pub first: &'a Level,
    /// Service time S (overhead included), s.
    pub s: f64,
    pub overhead_s: f64,
    pub cpu: &'a [CpuUse],
}

/// A saturated level within this share of the best throughput is at the ceiling: the levels
/// a ceiling pools, and the first of them is where "from N in flight on" starts.
pub const AT_CEILING: f64 = 0.95;

impl<'a> Ceiling<'a> {
    /// The ceiling `x` measured at `level`, its first level among `levels`, with the service
    /// time and overhead (s) and the CPU readings.
    pub fn at_level(
        x: &'a Estimate,
        level: &'a Level,
        levels: &'a [Level],
        (s, overhead_s): (f64, f64),
        cpu: &'a [CpuUse],
    ) -> Ceiling<'a> {
        let first = levels
            .iter()
            .filter(|l| l.saturated() && l.throughput.mean >= AT_CEILING * level.throughput.mean)
            .min_by(|a, b| a.level.magnitude().total_cmp(&b.level.magnitude()))
            .unwrap_or(level);
        Ceiling {
            x,
            level,
            first,
            s,
            overhead_s,
            cpu,
        }
    }

    /// "measured X req/s [low–high] from N in flight on", for the evidence.
    pub fn at(&self) -> String {
        format!(
            "measured {} from {} on",
            self.x.describe("req/s"),
            self.first.words()
        )
    }
}

/// The limit named (none when no limit can be), the verdict line, and the CPU site when CPU caps.
pub struct Verdict {
    pub limit: Option<Limit>,
    pub text: String,
    pub cpu: Option<CpuUse>,
}

/// Utilisation (servers busy ÷ servers) from which a bound counts as reached.
pub const MATCH: f64 = 0.85;
/// Utilisation above which the settings cannot be the ones running.
pub const ABOVE: f64 = 1.15;

/// What a named limit's finding is written from: the settings, the model's capacity for the job,
/// and the ceiling measured.
pub struct Named<'a> {
    pub s: &'a Settings,
    pub cap: &'a Capacity,
    pub job: Job,
    pub ceiling: &'a Ceiling<'a>,
}

impl Named<'_> {
    /// The figures every named limit's finding carries.
    pub fn base(&self, f: Finding) -> Finding {
        let (x, st) = (self.ceiling.x.mean, self.ceiling.s);
        f.figure("throughput_per_s", x)
            .figure("service_time_s", st)
            .figure("executions_in_progress", x * st)
            .figure("runner_tasks_running", x * self.job.code_s)
            .figure("worker_slots", self.cap.total_worker_concurrency as f64)
            .figure("runner_capacity", self.cap.total_runner_capacity as f64)
            .figure("worker_bound_per_s", self.cap.worker_bound)
            .figure("runner_bound_per_s", self.cap.runner_bound)
    }
}

/// Runner limit per runner we do not go past when adding capacity: n8n's default, and one
/// Node process per runner does not get faster with more tasks.
pub const RUNNER_LIMIT_PER_RUNNER: u32 = crate::model::n8n_defaults::RUNNER_LIMIT;

/// Runner capacity paired with worker concurrency: every slot that runs Code at once needs a
/// runner task (c × C ÷ (W + C)), never below today's, in runners of at most
/// [`RUNNER_LIMIT_PER_RUNNER`] tasks (or today's limit when higher).
pub fn with_runners(p: Settings, current: &Settings, job: Job) -> Settings {
    let code_share = job.code_s / job.job_time().max(1e-9);
    let code_slots = ((p.worker_concurrency_or_default() as f64) * code_share).ceil() as u32;
    let today = current
        .runner_limit_or_default()
        .saturating_mul(current.runners_per_worker_count());
    let capacity = code_slots.max(today).max(1);
    let per_runner = current
        .runner_limit_or_default()
        .max(RUNNER_LIMIT_PER_RUNNER);
    let runners = capacity
        .div_ceil(per_runner)
        .max(p.runners_per_worker_count())
        .max(1);
    let why = format!(
        "runner capacity {capacity} per worker for the slots that run Code ({:.0} % of the job)",
        code_share * 100.0
    );
    p.propose(|s| &mut s.runners_per_worker, runners, &why)
        .propose(|s| &mut s.runner_limit, capacity.div_ceil(runners), &why)
}

/// The deployment dialect `recommend` writes its settings in.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// A docker-compose snippet.
    Compose,
    /// Values of n8n's Helm chart (n8n-io/n8n-hosting).
    HelmOfficial,
    /// Values of the community chart (community-charts/helm-charts).
    HelmCommunity,
    /// A strategic merge patch for the worker Deployment.
    K8s,
}

/// The n8n process a setting line goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    Main,
    Worker,
    Runner,
}

/// How a setting is written in a dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// An environment variable.
    Env(&'static str),
    /// A command-line argument (`--concurrency=`), written with its value.
    Arg(&'static str),
    /// A chart value at a dotted path.
    Value(&'static str),
    /// How many of the process run (replicas).
    Replicas,
}

/// One setting of a plan, on one process, in one dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingLine {
    pub on: Process,
    pub key: Key,
    pub value: String,
}

impl SettingLine {
    pub fn new(on: Process, key: Key, value: impl ToString) -> SettingLine {
        SettingLine {
            on,
            key,
            value: value.to_string(),
        }
    }
}

/// A resource a mix's workflows share, and each workflow's part of it.
pub type Share = (&'static str, fn(&KindUse) -> f64);

/// What each limit kind answers.
pub trait Kind: Sync {
    /// Its bound from the settings and the job (none when the settings do not hold it: CPU is
    /// measured, not set).
    fn bound(&self, s: &Settings, job: Job) -> Option<Bound> {
        let _ = (s, job);
        None
    }

    /// What a run measured that its bound needs (a setting read from the metrics, a demand by
    /// Little's law), filled into the settings where they lack it.
    fn read_run(&self, s: &mut Settings, stages: &[StageResult], levels: &[Level]) {
        let _ = (s, stages, levels);
    }

    /// A failure of its resource the run counted that comes before any ceiling (connections
    /// refused): its finding, first, and the words that lead the verdict.
    fn leads(&self, stages: &[StageResult], findings: &mut Vec<Finding>) -> Option<String> {
        let _ = (stages, findings);
        None
    }

    /// The settings behind its bound, as "name value (source)", for the floor's suspect.
    fn readings(&self, s: &Settings) -> Vec<String>;

    /// Whether the setting behind it was inferred from this very run (then it equals the
    /// measurement by construction, and is no reading to doubt).
    fn inferred_here(&self, s: &Settings) -> bool;

    /// The most it can allow when its bound is `bound` executions/s: a slot is not held for the
    /// part of S outside the worker, so slot kinds reach `bound × S ÷ (S − overhead)`.
    fn most(&self, bound: f64, c: &Ceiling) -> f64 {
        let _ = c;
        bound
    }

    /// When only its own setting is known and the measured level reached it, it caps whatever
    /// the unknown one is: the finding, and the verdict with the bound it names.
    fn reached_alone(
        &self,
        s: &Settings,
        c: &Ceiling,
        findings: &mut Vec<Finding>,
    ) -> Option<(Verdict, f64)> {
        let _ = (s, c, findings);
        None
    }

    /// When it caps by the settings, yet the measurement shows what it does not allow (no runner
    /// task, yet executions completed): the finding naming the reading, and the settings with
    /// that reading dropped, to decide again from.
    fn refuted(&self, n: &Named, findings: &mut Vec<Finding>) -> Option<Settings> {
        let _ = (n, findings);
        None
    }

    /// It binds: its finding with the evidence, and the verdict line.
    fn caps(&self, n: &Named, findings: &mut Vec<Finding>) -> Verdict;

    /// The resource a mix's workflows share when it caps, and each workflow's part of it (none:
    /// not shared out by kind of job).
    fn shared_as(&self) -> Option<Share>;

    /// Whether any plan can be made while it caps (a missing runner must be attached first).
    fn plannable(&self) -> Result<(), NoPlan> {
        Ok(())
    }

    /// What raises it, from a knee: the plan.
    fn raise(&self, d: &Diagnosis, current: &Settings, job: Job) -> Result<Settings, NoPlan>;

    /// What the plan must say beside its settings for this kind (a timeout to keep above a
    /// measured wait, a budget to check).
    fn notes(&self, s: &Settings, plan: &Settings) -> Vec<String> {
        let _ = (s, plan);
        Vec::new()
    }

    /// Its setting lines in `dialect` for the settings a plan proposes.
    fn lines(&self, plan: &Settings, dialect: Dialect) -> Vec<SettingLine>;
}

/// The file that answers for `limit`: the one `match` over `Limit` outside the model.
pub fn of(limit: Limit) -> &'static dyn Kind {
    match limit {
        Limit::WorkerConcurrency => &worker_slots::WorkerSlots,
        Limit::RunnerLimit => &runner_tasks::RunnerTasks,
        Limit::NoRunner => &runner_tasks::NoRunner,
        Limit::Both => &pair::Level,
        Limit::Cpu => &cpu::Cpu,
        Limit::ProductionLimit => &production::Production,
        Limit::DbPool => &db_pool::DbPool,
    }
}

/// Every kind a setting raises, in the order a plan's settings are written.
pub const SET: [Limit; 4] = [
    Limit::WorkerConcurrency,
    Limit::ProductionLimit,
    Limit::RunnerLimit,
    Limit::DbPool,
];

/// Every kind whose setting alone can be known and reached.
pub const ALONE: [Limit; 2] = [Limit::WorkerConcurrency, Limit::RunnerLimit];

/// The capacity of `s` for a job with every kind's bound in it: the model's slots and runner
/// tasks, and any bound another kind holds (smallest first).
pub fn capacity(s: &Settings, overhead_s: f64) -> Option<Capacity> {
    let mut cap = s.capacity(overhead_s)?;
    let job = s.job(overhead_s)?;
    let mut extra: Vec<Bound> = SET
        .iter()
        .filter_map(|l| of(*l).bound(s, job))
        .filter(|b| !cap.bounds.iter().any(|c| c.limit == b.limit))
        .collect();
    if !extra.is_empty() {
        cap.bounds.append(&mut extra);
        cap.bounds.sort_by(|a, b| a.per_s().total_cmp(&b.per_s()));
        cap.capping = crate::model::capping_of(&cap.bounds);
        if let Some(b) = cap.binding() {
            cap.ceiling = cap.ceiling.min(b.per_s());
        }
        cap.effective_concurrency = cap.ceiling * job.service_time();
    }
    Some(cap)
}

/// What a run measured that every kind's bound needs, filled into the settings.
pub fn read_run(s: &mut Settings, stages: &[StageResult], levels: &[Level]) {
    for l in SET {
        of(l).read_run(s, stages, levels);
    }
}

/// The setting lines of a plan in `dialect`, every kind's in [`SET`] order.
pub fn lines(plan: &Settings, dialect: Dialect) -> Vec<SettingLine> {
    SET.iter()
        .flat_map(|l| of(*l).lines(plan, dialect))
        .collect()
}

pub fn pct(v: f64) -> String {
    format!("{:.0} %", v * 100.0)
}

/// " (where it came from)" of a known setting, for the evidence; nothing when unknown.
pub fn source_of(o: &Option<Sourced<u32>>) -> String {
    o.as_ref()
        .map(|v| format!(" ({})", v.source))
        .unwrap_or_default()
}

/// "what value (source)" of a known setting.
pub fn reading(o: &Option<Sourced<u32>>, what: &str) -> Option<String> {
    o.as_ref()
        .map(|v| format!("{what} {} ({})", v.value, v.source))
}

/// The bound of `limit` among the model's slots and runner tasks for `s` and the job.
pub fn model_bound(s: &Settings, job: Job, limit: Limit) -> Option<Bound> {
    s.capacity(job.overhead_s)?
        .bounds
        .into_iter()
        .find(|b| b.limit == limit)
}

/// Worker concurrency's and the runner limit's readings, the known ones.
pub fn slot_and_runner_readings(s: &Settings) -> Vec<String> {
    [
        reading(&s.worker_concurrency, "worker concurrency"),
        reading(&s.runner_limit, "runner limit"),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Whether a setting was inferred from a measurement (it carries an interval).
pub fn inferred(o: &Option<Sourced<u32>>) -> bool {
    o.as_ref().is_some_and(|v| v.interval.is_some())
}

/// Code time C: from the settings, else all of the job (a workflow of one Code node).
pub fn code_time(s: &Settings, ceiling: &Ceiling) -> f64 {
    match (&s.code_time, &s.job_time) {
        (Some(c), _) => c.value,
        (None, Some(j)) => j.value,
        (None, None) => (ceiling.s - ceiling.overhead_s).max(0.0),
    }
}

/// Without a measured CPU ceiling, worker concurrency is raised one step of 1.5× (the inverse
/// of the 2/3 safety factor) and the prediction is an upper bound.
const STEP_WITHOUT_CPU: f64 = 1.5;

/// More slots, from a knee: up to where one worker's CPU binds (one step of 1.5× when CPU was
/// not measured), runners paired with them.
/// The largest raise of the slots in one plan when the CPU was measured (without it, one step
/// of [`STEP_WITHOUT_CPU`]).
const STEP_WITH_CPU: f64 = 2.0;

fn raise_slots(d: &Diagnosis, current: &Settings, job: Job) -> Result<Settings, NoPlan> {
    let now = current.worker_concurrency_or_default();
    let worker_cpu = cpu::per_role_bound(&d.cpu, crate::record::Role::Worker)
        .map(|b| b / current.worker_count() as f64);
    // A raise is one step: the CPU bound read from a run below it extrapolates the CPU per
    // execution far past any load measured (an I/O-bound job's idle worker allows thousands
    // a second), so it only stops a step short, never lengthens it.
    let step = (now as f64 * STEP_WITH_CPU).ceil() as u32;
    let (target, why) = match worker_cpu {
        Some(b) if ((b * job.service_time()).floor() as u32) < step => (
            (b * job.service_time()).floor() as u32,
            format!("slots up to where one worker's measured CPU binds ({b:.2} req/s)"),
        ),
        Some(b) => (
            step,
            format!(
                "one step of {STEP_WITH_CPU}× from {now}: one worker's measured CPU allows {b:.2} req/s, \
                 beyond it — sweep again after this step"
            ),
        ),
        None => (
            (now as f64 * STEP_WITHOUT_CPU).ceil() as u32,
            format!("one step of {STEP_WITHOUT_CPU}× from {now} (CPU not measured)"),
        ),
    };
    let plan = current
        .clone()
        .propose(|s| &mut s.worker_concurrency, target.max(now + 1), why);
    Ok(with_runners(plan, current, job))
}

/// Every execution holds a slot: the slots are what a mix shares.
const SLOTS: Share = ("worker slots", |u| u.slot_share);

/// A slot kind's most: the slots are not held for the overhead outside the worker.
fn slot_most(bound: f64, c: &Ceiling) -> f64 {
    bound * c.s / (c.s - c.overhead_s).max(1e-9)
}
