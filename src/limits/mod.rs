//! One file per limit kind, named as its variant and its type (`Limit::DbPool`, `db_pool.rs`,
//! `DbPool`): each says its bound from the settings and the job, when it binds and its finding
//! with the evidence, what raises it, and its setting lines in each config dialect. The verdict
//! (`diagnose::verdict`) and the plan (`recommend`, whose proposed changes in each dialect are
//! [`proposal`]'s, which the snippets of `report::dialect` place) choose among the kinds
//! through [`Kind`] and never name one; [`of`] is the one place a `Limit`
//! becomes its file, so a new variant is answered there and in its own file; [`answering`] does
//! the same for a verdict's `Capping`, whose two states that are no kind (both level, no runner)
//! answer from `both.rs` and `no_runner.rs`. This file is that dispatch and the vocabulary of
//! the trait; what several kinds share is `reading.rs` (a setting as evidence says it) and
//! `slots.rs` (the slot kinds' arithmetic); a setting line's shape is the model's
//! (`model::proposal`).

pub mod both;
pub mod cpu;
pub mod db_pool;
pub mod host_cpu;
pub use host_cpu::{host_contended, is_host_contended};
pub mod main_intake;
pub mod no_runner;
pub mod postgres_connections;
pub mod postgres_server;
pub mod production_limit;
pub mod reading;
pub mod redis;
pub mod runner_limit;
pub mod slots;
pub mod worker_concurrency;

use crate::error::NoPlan;
use crate::findings::Finding;
use crate::model::mix::KindUse;
use crate::model::settings::Settings;
use crate::model::{Bound, Capacity, Capping, Job, Limit};
use crate::record::diagnosis::{CpuUse, Diagnosis, Level};
use crate::record::scaling::SharedLimit;
use crate::record::Role;
use crate::record::{Estimate, StageResult};

pub use crate::model::proposal::{Dialect, Key, Process, Proposal, SettingLine};

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
        let first = at_ceiling(levels, level)
            .into_iter()
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
    pub limit: Option<Capping>,
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
            .figure("worker_slots", self.cap.slots() as f64)
            .figure("runner_capacity", self.cap.runner_tasks() as f64)
            .figure("worker_bound_per_s", self.cap.worker_bound())
            .figure("runner_bound_per_s", self.cap.runner_bound())
    }
}

/// A resource a mix's workflows share, and each workflow's part of it.
pub type Share = (&'static str, fn(&KindUse) -> f64);

/// Every execution holds a slot: the slots are what a mix shares.
pub const SLOTS: Share = ("worker slots", |u| u.slot_share);

/// How many of a limit a deployment has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Each worker (or each process a plan multiplies) brings its own: more of them raise it.
    PerWorker,
    /// One for the deployment however many workers it runs (main's intake, the host's cores,
    /// Postgres, Redis): what moves it when it stops scale-out, which no worker setting does.
    Deployment { relief: &'static str },
}

/// The saturated levels the measured ceiling at `top` pools (within [`AT_CEILING`] of its
/// throughput): what is read per execution at the ceiling (CPU seconds) is read over these same
/// stages, so that the figure and the throughput it is divided by share their windows.
pub fn at_ceiling<'a>(levels: &'a [Level], top: &Level) -> Vec<&'a Level> {
    levels
        .iter()
        .filter(|l| l.saturated() && l.throughput.mean >= AT_CEILING * top.throughput.mean)
        .collect()
}

/// What each limit kind answers.
pub trait Kind: Sync {
    /// What it is: set or measured, shared by the deployment, known alone, in the headline.
    fn membership(&self) -> Membership;

    /// Whether each worker brings its own, or one is shared by the deployment and what moves it.
    fn scope(&self) -> Scope {
        Scope::PerWorker
    }

    /// One for the deployment: its bound as the run at the highest worker count of a scale-out
    /// saw it, whether that run was at it, and the evidence (None: per worker, or not measured).
    fn shared(&self, d: &Diagnosis) -> Option<SharedLimit> {
        let _ = d;
        None
    }

    /// The process whose own CPU is this bound (main's intake: main), for the relief of a
    /// saturated process of that role.
    fn server(&self) -> Option<Role> {
        None
    }

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

    /// Its setting's name and flag when the settings lack it and the verdict needs it to say
    /// which limit caps (None: known, or not needed).
    fn unknown(&self, s: &Settings) -> Option<&'static str> {
        let _ = s;
        None
    }

    /// Its setting, when unknown, inferred from the run (the gauges, or one saturated level at
    /// `ceiling` while the other setting is known and not reached), marked inferred with its
    /// interval. Kinds infer in [`set_kinds`]' order: worker concurrency before the runner limit.
    fn infer(&self, s: &mut Settings, levels: &[Level], ceiling: Option<&Ceiling>) {
        let _ = (s, levels, ceiling);
    }

    /// A failure of its resource the run counted that comes before any ceiling (connections
    /// refused): its finding, first, and the words that lead the verdict.
    fn leads(
        &self,
        stages: &[StageResult],
        s: &Settings,
        findings: &mut Vec<Finding>,
    ) -> Option<String> {
        let _ = (stages, s, findings);
        None
    }

    /// A kind measured rather than set (CPU): whether the run saw it saturated at the ceiling.
    fn saturated(&self, s: &Settings, c: &Ceiling) -> bool {
        let _ = (s, c);
        false
    }

    /// A measured kind saturated at the ceiling caps whatever the settings allow (`cap`, when
    /// known): its finding and verdict; None when it was not seen saturated.
    fn caps_measured(
        &self,
        s: &Settings,
        cap: Option<&Capacity>,
        c: &Ceiling,
        findings: &mut Vec<Finding>,
    ) -> Option<Verdict> {
        let _ = (s, cap, c, findings);
        None
    }

    /// The bounds a plan's settings `plan` meet from what the run measured of it (CPU: each
    /// process's scaled by how many of it the plan runs, and the host's), against today's `now`.
    fn predicted(&self, d: &[CpuUse], now: &Settings, plan: &Settings) -> Vec<(f64, Limit)> {
        let _ = (d, now, plan);
        Vec::new()
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

    /// Whether it sits before the workers (main's intake): at its ceiling the workers' slots
    /// are not all taken, and more workers add nothing.
    fn before_the_workers(&self) -> bool {
        false
    }

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
        Limit::WorkerConcurrency => &worker_concurrency::WorkerConcurrency,
        Limit::RunnerLimit => &runner_limit::RunnerLimit,
        Limit::Cpu => &cpu::Cpu,
        Limit::ProductionLimit => &production_limit::ProductionLimit,
        Limit::DbPool => &db_pool::DbPool,
        Limit::MainIntake => &main_intake::MainIntake,
        Limit::HostCpu => &host_cpu::HostCpu,
        Limit::PostgresConnections => &postgres_connections::PostgresConnections,
        Limit::PostgresServer => &postgres_server::PostgresServer,
        Limit::Redis => &redis::Redis,
    }
}

/// What a kind is, as each kind answers it ([`Kind::membership`], which has no default: a
/// kind that does not say what it is does not compile). The lists of kinds below are read from
/// these answers, in [`ALL`]'s order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Membership {
    /// A setting raises it: its bound comes from the settings, and a plan proposes the setting.
    pub set: bool,
    /// Measured rather than set: its bound is read from the run (CPU, main's intake, Redis).
    pub measured: bool,
    /// One for the deployment however many workers ([`Scope::Deployment`]): it stops scale-out.
    pub shared: bool,
    /// Its setting alone can be known and reached (then it caps whatever the other is).
    pub alone: bool,
    /// Its setting is said in a plan's first line (workers × concurrency, runners × their
    /// limit, regular mode's production limit); every other kind's lines are said under it.
    pub headline: bool,
}

/// Every kind once, in the order each list of them is taken: a plan's settings in the order
/// they are written (worker concurrency before the runner limit: kinds infer in this order);
/// then what every worker shares in the order a scale-out names it — Postgres' connections
/// first (refused or pooled, they fail or hold executions whatever the rest allow, and each
/// added worker's pool asks for more), then the servers, the host last —; CPU measured last.
pub const ALL: [Limit; 10] = [
    Limit::WorkerConcurrency,
    Limit::ProductionLimit,
    Limit::RunnerLimit,
    Limit::DbPool,
    Limit::PostgresConnections,
    Limit::MainIntake,
    Limit::Redis,
    Limit::PostgresServer,
    Limit::HostCpu,
    Limit::Cpu,
];

fn kinds(pick: fn(Membership) -> bool) -> Vec<Limit> {
    ALL.into_iter()
        .filter(|l| pick(of(*l).membership()))
        .collect()
}

/// Every kind one for the deployment, in the order a scale-out names them.
pub fn shared_kinds() -> Vec<Limit> {
    kinds(|m| m.shared)
}

/// Every kind a setting raises, in the order a plan's settings are written.
pub fn set_kinds() -> Vec<Limit> {
    kinds(|m| m.set)
}

/// Every kind measured rather than set, in the order the verdict asks them.
pub fn measured_kinds() -> Vec<Limit> {
    kinds(|m| m.measured)
}

/// Every kind whose setting alone can be known and reached.
pub fn alone_kinds() -> Vec<Limit> {
    kinds(|m| m.alone)
}

/// The kinds whose settings a plan's first line says.
pub fn headline_kinds() -> Vec<Limit> {
    kinds(|m| m.headline)
}

/// The limits every worker shares, as the run at the highest worker count saw them
/// ([`Kind::shared`], in [`shared_kinds`]' order).
pub fn shared_limits(d: &Diagnosis) -> Vec<SharedLimit> {
    shared_kinds()
        .iter()
        .filter_map(|l| of(*l).shared(d))
        .collect()
}

/// What relieves a saturated process of `role` when it is a server every worker shares (main's
/// intake, Redis, Postgres' server): its kind's relief; None for a role each worker brings.
pub fn server_relief(role: Role) -> Option<&'static str> {
    shared_kinds()
        .iter()
        .map(|l| of(*l))
        .filter(|k| k.server() == Some(role))
        .find_map(|k| match k.scope() {
            Scope::Deployment { relief } => Some(relief),
            Scope::PerWorker => None,
        })
}

/// A server's CPU as a shared limit (Postgres' server, Redis): its bound where the run measured
/// the process of `role`, with `what` it does for every worker, and `relief`, its kind's.
pub fn server_cpu(
    d: &Diagnosis,
    (kind, relief): (Limit, &str),
    role: Role,
    what: &str,
) -> Option<SharedLimit> {
    let u = d.cpu.iter().find(|u| u.is_process_of(role))?;
    Some(SharedLimit {
        kind,
        bound_per_s: Some(u.bound_per_s),
        reached: u.saturated,
        evidence: vec![format!(
            "{} ({}) used {:.2} of {:.1} usable cores ({}): {:.2} ms of CPU per execution, so \
             it takes at most {:.1} executions/s",
            role.word(),
            u.name,
            u.cores_used,
            u.usable_cores.value,
            what,
            u.cpu_s_per_execution * 1000.0,
            u.bound_per_s
        )],
        fix: relief.to_string(),
    })
}

/// The verdict of a kind one run names through another (the host's CPU is CPU's site, Postgres'
/// connections the pools'): no limit, and which kind says it.
pub fn named_elsewhere(what: &str, by: &str) -> Verdict {
    Verdict {
        limit: None,
        text: format!("{what} was named, but in one run it is named as {by}"),
        cpu: None,
    }
}

/// What answers for a verdict's capping: its kind's file, or the file of the state (both level,
/// no runner) the verdict is in.
pub fn answering(c: Capping) -> &'static dyn Kind {
    match c {
        Capping::Kind(l) => of(l),
        Capping::Both => &both::Both,
        Capping::NoRunner => &no_runner::NoRunner,
    }
}

/// Whether a measured kind was seen saturated at the ceiling.
pub fn measured_saturated(s: &Settings, c: &Ceiling) -> bool {
    measured_kinds().iter().any(|l| of(*l).saturated(s, c))
}

/// The first measured kind saturated at the ceiling: its finding and verdict.
pub fn measured_caps(
    s: &Settings,
    cap: Option<&Capacity>,
    c: &Ceiling,
    findings: &mut Vec<Finding>,
) -> Option<Verdict> {
    measured_kinds()
        .iter()
        .find_map(|l| of(*l).caps_measured(s, cap, c, findings))
}

/// Every bound the measured kinds put on a plan's settings.
pub fn measured_bounds(d: &[CpuUse], now: &Settings, plan: &Settings) -> Vec<(f64, Limit)> {
    measured_kinds()
        .iter()
        .flat_map(|l| of(*l).predicted(d, now, plan))
        .collect()
}

/// The capacity of `s` for a job with every kind's bound in it: the model's slots and runner
/// tasks, and any bound another kind holds (smallest first).
pub fn capacity(s: &Settings, overhead_s: f64) -> Option<Capacity> {
    let mut cap = s.slots_and_runners(overhead_s)?;
    let job = s.job(overhead_s)?;
    let mut extra: Vec<Bound> = set_kinds()
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

/// The settings the verdict needs that are unknown, in [`set_kinds`]' order ([`Kind::unknown`]).
pub fn unknown(s: &Settings) -> Vec<&'static str> {
    set_kinds()
        .iter()
        .filter_map(|l| of(*l).unknown(s))
        .collect()
}

/// The readings behind every bound of `cap` ([`Kind::readings`]), in [`set_kinds`]' order: what a
/// measurement above them puts in doubt.
pub fn readings(s: &Settings, cap: &Capacity) -> Vec<String> {
    set_kinds()
        .iter()
        .filter(|l| cap.bound_of(**l).is_some())
        .flat_map(|l| of(*l).readings(s))
        .collect()
}

/// Every unknown setting a kind can infer from the run, inferred ([`Kind::infer`]).
pub fn infer(s: &mut Settings, levels: &[Level], ceiling: Option<&Ceiling>) {
    for l in set_kinds() {
        of(l).infer(s, levels, ceiling);
    }
}

/// What a run measured that every kind's bound needs, filled into the settings.
pub fn read_run(s: &mut Settings, stages: &[StageResult], levels: &[Level]) {
    for l in set_kinds() {
        of(l).read_run(s, stages, levels);
    }
}

/// The setting lines of a plan in `dialect`, every kind's in [`set_kinds`]' order.
pub fn lines(plan: &Settings, dialect: Dialect) -> Vec<SettingLine> {
    set_kinds()
        .iter()
        .flat_map(|l| of(*l).lines(plan, dialect))
        .collect()
}

/// A plan's proposed changes: every kind's setting lines in each dialect, made once, when the
/// plan is made.
pub fn proposal(plan: &Settings) -> Proposal {
    Proposal::new(|d| (lines(plan, d), lines_beyond_headline(plan, d)))
}

/// The setting lines of a plan in `dialect` beyond what its first line says.
pub fn lines_beyond_headline(plan: &Settings, dialect: Dialect) -> Vec<SettingLine> {
    set_kinds()
        .iter()
        .filter(|l| !headline_kinds().contains(l))
        .flat_map(|l| of(*l).lines(plan, dialect))
        .collect()
}

/// The bound of `limit` among the model's slots and runner tasks for `s` and the job.
pub fn model_bound(s: &Settings, job: Job, limit: Limit) -> Option<Bound> {
    s.slots_and_runners(job.overhead_s)?
        .bounds
        .into_iter()
        .find(|b| b.limit == limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind says what it is, and the lists read from the answers are the ones the verdict,
    /// the plan and a scale-out have always taken, in their order.
    #[test]
    fn each_kind_states_its_membership_and_the_lists_follow() {
        use Limit::*;
        assert_eq!(
            shared_kinds(),
            vec![
                PostgresConnections,
                MainIntake,
                Redis,
                PostgresServer,
                HostCpu
            ]
        );
        assert_eq!(
            set_kinds(),
            vec![WorkerConcurrency, ProductionLimit, RunnerLimit, DbPool]
        );
        assert_eq!(measured_kinds(), vec![MainIntake, Redis, Cpu]);
        assert_eq!(alone_kinds(), vec![WorkerConcurrency, RunnerLimit]);
        assert_eq!(
            headline_kinds(),
            vec![WorkerConcurrency, ProductionLimit, RunnerLimit]
        );
        // Every variant once in ALL (the match has no catch-all: a new one must be placed).
        let place = |l: Limit| match l {
            WorkerConcurrency | ProductionLimit | RunnerLimit | DbPool => 0,
            PostgresConnections | MainIntake | Redis | PostgresServer | HostCpu => 1,
            Cpu => 2,
        };
        let mut seen: Vec<Limit> = ALL.to_vec();
        seen.dedup();
        assert_eq!(seen.len(), 10);
        assert!(ALL.windows(2).all(|w| place(w[0]) <= place(w[1])));
        for l in ALL {
            let m = of(l).membership();
            assert_eq!(m.shared, of(l).scope() != Scope::PerWorker, "{l:?}");
            assert!(!(m.set && m.measured), "{l:?}: set and measured");
            assert!(!m.headline || m.set, "{l:?}: a headline is a setting");
            assert!(!m.alone || m.set, "{l:?}: alone is a setting");
        }
    }
    use crate::model::settings::{Provenance, Sourced};

    /// What the verdict lacks and what a measurement above the bounds doubts are the kinds'
    /// own: worker concurrency's and the runner limit's flags when unknown; every bound's
    /// reading, the pool's among them, when known.
    #[test]
    fn the_unknown_settings_and_the_readings_in_doubt_are_each_kind_s() {
        let mut s = Settings::default();
        assert_eq!(
            unknown(&s),
            [
                "worker concurrency (--worker-concurrency)",
                "runner limit (--runner-limit)"
            ]
        );
        let flag = |v: u32| Some(Sourced::new(v, Provenance::Flag("--x".into())));
        s.worker_concurrency = flag(10);
        assert_eq!(unknown(&s), ["runner limit (--runner-limit)"]);
        s.runner_limit = flag(5);
        s.job_time = Some(Sourced::new(1.0, Provenance::Flag("--job-time".into())));
        s.code_time = Some(Sourced::new(0.5, Provenance::Flag("--code-time".into())));
        assert!(unknown(&s).is_empty());
        let cap = capacity(&s, 0.0).unwrap();
        let r = readings(&s, &cap);
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(r[0].starts_with("worker concurrency 10") && r[1].starts_with("runner limit 5"));
    }

    /// A plan's lines beyond its first line are every kind's but the headline's: the database
    /// pool's on the workers, and none of worker concurrency's, the runners' or main's limit.
    #[test]
    fn the_lines_beyond_the_headline_are_the_other_kinds_only() {
        let set = |v: u32| Some(Sourced::new(v, Provenance::Flag("--test".into())));
        let plan = Settings {
            worker_concurrency: set(10),
            runner_limit: set(5),
            db_pool_size: set(8),
            ..Settings::default()
        };
        let all = lines(&plan, Dialect::Compose);
        let beyond = lines_beyond_headline(&plan, Dialect::Compose);
        assert_eq!(
            beyond,
            [SettingLine::new(
                Process::Worker,
                Key::Env("DB_POSTGRESDB_POOL_SIZE"),
                8
            )]
        );
        assert!(all.len() >= 3, "{all:?}");
        assert!(all.contains(&beyond[0]));
    }
}
