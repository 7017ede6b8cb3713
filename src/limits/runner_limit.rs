//! The runner limit: `N8N_RUNNERS_MAX_CONCURRENCY` on each runner, summed over the runners attached
//! to a worker's broker; one task held for the Code time C. Bound Σr ÷ C. With no runner
//! attached (capacity 0) no Code task runs at all: `no_runner.rs`.

use super::reading::{code_time, inferred, pct, reading, source_of, whole, AtCeiling};
use super::Membership;
use super::{Ceiling, Dialect, Key, Kind, Named, Process, SettingLine, Verdict};
use crate::error::NoPlan;
use crate::findings::{Finding, FindingId};
use crate::model::settings::{Settings, Sourced};
use crate::model::{Bound, Job, Limit};
use crate::record::diagnosis::{Diagnosis, Level};

pub struct RunnerLimit;

impl Kind for RunnerLimit {
    fn membership(&self) -> Membership {
        Membership {
            set: true,
            alone: true,
            headline: true,
            ..Membership::default()
        }
    }

    /// The runner limit, when unknown: from X × C at a saturated level, when worker
    /// concurrency is known and not reached and Code ran.
    fn infer(&self, s: &mut Settings, _: &[Level], ceiling: Option<&Ceiling>) {
        let Some(c) = ceiling else { return };
        let Some(at) = AtCeiling::of(s, c) else {
            return;
        };
        let workers = s.worker_count() as f64;
        let rpw = s.runners_per_worker_count().max(1) as f64;
        let (x, code, tasks) = (at.x, at.code, at.tasks);
        if let (Some(wc), None) = (&s.worker_concurrency, &s.runner_limit) {
            if at.in_progress < super::MATCH * wc.value as f64 * workers && tasks >= 0.5 {
                let k = code / (workers * rpw);
                s.runner_limit = Some(Sourced::inferred(
                    x * k,
                    whole([c.x.low * k, c.x.high * k]),
                    format!(
                        "inferred from one saturated level ({}): {x:.2} req/s × Code time {code:.2} s = {tasks:.1} runner tasks",
                        c.level.words()
                    ),
                ));
            }
        }
    }

    fn bound(&self, s: &Settings, job: Job) -> Option<Bound> {
        super::model_bound(s, job, Limit::RunnerLimit)
    }

    fn unknown(&self, s: &Settings) -> Option<&'static str> {
        s.runner_limit
            .is_none()
            .then_some("runner limit (--runner-limit)")
    }

    fn readings(&self, s: &Settings) -> Vec<String> {
        reading(&s.runner_limit, "runner limit")
            .into_iter()
            .collect()
    }

    fn inferred_here(&self, s: &Settings) -> bool {
        inferred(&s.runner_limit)
    }

    fn reached_alone(
        &self,
        s: &Settings,
        c: &Ceiling,
        findings: &mut Vec<Finding>,
    ) -> Option<(Verdict, f64)> {
        let r = s
            .runner_limit
            .as_ref()
            .filter(|_| s.worker_concurrency.is_none())?;
        let x = c.x.mean;
        let tasks =
            r.value as f64 * s.runners_per_worker_count().max(1) as f64 * s.worker_count() as f64;
        let code = code_time(s, c);
        let u = x * code / tasks;
        if u < super::MATCH {
            return None;
        }
        let at = c.at();
        findings.push(
            Finding::new(
                FindingId::RunnerLimitCaps,
                format!("The runner limit caps throughput at {x:.2} req/s: {tasks:.0} runner tasks"),
            )
            .evidence(format!(
                "{:.1} runner tasks running (X × C = {x:.2} × {code:.2} s) = {} of runner capacity {tasks:.0} ({}); {at}",
                x * code,
                pct(u),
                r.source
            ))
            .figure("throughput_per_s", x)
            .figure("runner_tasks_running", x * code)
            .figure("runner_capacity", tasks)
            .fix("raise N8N_RUNNERS_MAX_CONCURRENCY on the runner containers (or add runners per worker)"),
        );
        let bound = tasks / code.max(1e-9);
        let v = Verdict {
            limit: Some(Limit::RunnerLimit.into()),
            text: format!(
                "The runner limit caps throughput: {at}; {tasks:.0} runner tasks ÷ {code:.2} s = {bound:.2} req/s."
            ),
            cpu: None,
        };
        Some((v, bound))
    }

    /// The slots taken while throughput stays under what they allow, the runner tasks running
    /// against runner capacity.
    fn caps(&self, n: &Named, findings: &mut Vec<Finding>) -> Verdict {
        let (s, cap, job, ceiling) = (n.s, n.cap, n.job, n.ceiling);
        let x = ceiling.x.mean;
        let st = ceiling.s;
        let at = ceiling.at();
        let (c, r) = (cap.slots(), cap.runner_tasks());
        let u_r = x * job.code_s / r.max(1) as f64;
        let slots = ceiling.level.slots_taken;
        // Slots taken: the gauge's reading, else every execution in progress holds one (at most
        // the slots there are).
        let taken = slots.unwrap_or(x * st).min(c as f64);
        let mut f = n.base(Finding::new(FindingId::RunnerLimitCaps,
            format!("The runner limit caps throughput at {x:.2} req/s: {r} runner tasks for {c} worker slots"),
        ))
        .figure("under_worker_bound", 1.0 - x / cap.worker_bound().max(1e-9));
        if let Some(sl) = slots {
            f = f.figure("slots_taken", sl).evidence(format!(
                "slots {} taken ({sl:.1} of {c}), yet throughput {x:.2} req/s is {} under worker concurrency ÷ S ({c} ÷ {st:.2} s = {:.2} req/s)",
                pct(sl / c.max(1) as f64),
                pct(1.0 - x / cap.worker_bound().max(1e-9)),
                cap.worker_bound()
            ));
        }
        f = f
            .evidence(format!(
                "{:.1} runner tasks running (X × C = {x:.2} × {:.2} s) = {} of runner capacity {r}{}; {at}",
                x * job.code_s,
                job.code_s,
                pct(u_r),
                source_of(&s.runner_limit)
            ))
            .evidence(format!(
                "{:.1} executions in progress (X × S) of {c} slots: {:.1} slots taken hold a job that waits for a runner ({:.1} taken − {:.1} runner tasks running); n8n's queue gauges count slots taken, not runner tasks",
                x * st,
                (taken - x * job.code_s).max(0.0),
                taken,
                x * job.code_s
            ))
            .why("Adding workers or raising --concurrency changes nothing while each worker's runners cap Code tasks.")
            .fix(format!(
                "raise N8N_RUNNERS_MAX_CONCURRENCY on the runner containers (or add runners per worker) to at least {} per worker",
                (c as f64 / s.worker_count() as f64 * job.code_s / job.job_time().max(1e-9)).ceil()
            ));
        findings.push(f);
        Verdict {
            limit: Some(Limit::RunnerLimit.into()),
            text: format!(
                "The runner limit caps throughput: {at}; {r} runner tasks ÷ {:.2} s = {:.2} req/s, while {c} worker slots would allow {:.2} req/s.",
                job.code_s, cap.runner_bound(), cap.worker_bound()
            ),
            cpu: None,
        }
    }

    fn shared_as(&self) -> Option<super::Share> {
        Some(("runner tasks", |u| u.runner_share))
    }

    fn raise(&self, _d: &Diagnosis, current: &Settings, job: Job) -> Result<Settings, NoPlan> {
        Ok(super::runner_limit::with_runners(
            current.clone(),
            current,
            job,
        ))
    }

    /// Compose runs `runners_per_worker` runners of `runner_limit` each; the charts run one
    /// runner sidecar per pod, which carries the capacity per worker. In regular mode main's
    /// internal runner holds it.
    fn lines(&self, plan: &Settings, dialect: Dialect) -> Vec<SettingLine> {
        const VAR: &str = "N8N_RUNNERS_MAX_CONCURRENCY";
        let limit = plan.runner_limit_or_default();
        let cap = limit.saturating_mul(plan.runners_per_worker_count());
        if plan.is_regular() {
            return vec![SettingLine::new(Process::Main, Key::Env(VAR), cap)];
        }
        // Every dialect pairs one runner with each worker and sums the runners proposed into its
        // limit: compose cannot pair a second runner with one replica of a worker either.
        let line = match dialect {
            Dialect::HelmCommunity => SettingLine::new(
                Process::Runner,
                Key::Value("taskRunners.maxConcurrency"),
                cap,
            ),
            Dialect::Compose | Dialect::HelmOfficial | Dialect::K8s => {
                SettingLine::new(Process::Runner, Key::Env(VAR), cap)
            }
        };
        vec![line]
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
