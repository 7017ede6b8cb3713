//! An autoscaler replayed over an arrival curve: the HPA's control loop (as KEDA drives it) on
//! the queue n8n's workers drain, one second at a time. Each decision reads the jobs the trigger
//! counts, computes `ceil(metric ÷ target)` (unchanged within the HPA's 10 % tolerance), keeps
//! the highest recommendation of the scale-down stabilisation window (the lowest of the
//! scale-up one), limits the change by the behaviour's policies, and clamps to min and max. New
//! pods serve after their start time; a removed pod stops at once and the jobs it held are at
//! risk — those whose rest outlasts the shutdown window are lost (`model::drain`). The queue is
//! a fluid: each second, what arrived and waited is served up to the ready workers' ceiling;
//! the jobs in service are that rate × the job time (Little's law), bounded by the slots.
//!
//! Decisions are taken once per polling interval (KEDA's `pollingInterval`, which the
//! hand-checked case of the issue uses); the Kubernetes HPA's own 15 s sync is not modelled
//! apart.

use serde::{Deserialize, Serialize};

/// What a trigger counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Waiting and active jobs together (KEDA's `scalingModifiers` formula, or n8ncap's
    /// external metric).
    Held,
    /// The waiting list alone.
    Waiting,
    /// The active list alone.
    Active,
    /// A list that is not the queue's (a wrong prefix or database): always empty.
    Nothing,
    /// A `scalingModifiers` formula that weighs the lists otherwise than once each
    /// (`waiting * 1000 + active`): its weights and constant, as the formula reads.
    Weighted {
        waiting: f64,
        active: f64,
        constant: f64,
    },
}

/// One behaviour policy: at most `value` pods (or percent) per `period_s`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RatePolicy {
    pub percent: bool,
    pub value: u32,
    pub period_s: u32,
}

/// Which policy wins when several apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Select {
    Max,
    Min,
    Disabled,
}

/// One direction's behaviour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rules {
    pub window_s: u32,
    pub policies: Vec<RatePolicy>,
    pub select: Select,
}

impl Rules {
    /// Kubernetes' default scale-up: no window; 4 pods or 100 % per 15 s, whichever is more.
    pub fn default_up() -> Rules {
        Rules {
            window_s: 0,
            policies: vec![
                RatePolicy {
                    percent: false,
                    value: 4,
                    period_s: 15,
                },
                RatePolicy {
                    percent: true,
                    value: 100,
                    period_s: 15,
                },
            ],
            select: Select::Max,
        }
    }
    /// Kubernetes' default scale-down: a 300 s window, 100 % per 15 s.
    pub fn default_down() -> Rules {
        Rules {
            window_s: 300,
            policies: vec![RatePolicy {
                percent: true,
                value: 100,
                period_s: 15,
            }],
            select: Select::Max,
        }
    }
}

/// An autoscaler as the replay needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// Its name ("ScaledObject n8n-worker (deployed)").
    pub name: String,
    pub poll_s: u32,
    /// The triggers and their targets per replica; the largest desired count wins (KEDA and the
    /// HPA both take the maximum over metrics).
    pub signals: Vec<(Metric, f64)>,
    pub min: u32,
    pub max: u32,
    pub up: Rules,
    pub down: Rules,
}

/// An autoscaler read from a manifest: its loop, or why the replay cannot run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    Replayable(Policy),
    NotReplayed(String),
}

/// The workers the autoscaler adds and removes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// One worker's ceiling, executions/s.
    pub per_worker_per_s: f64,
    /// The job time, s.
    pub job_s: f64,
    /// Seconds from a pod's creation to its first job.
    pub pod_start_s: u32,
    /// A removed worker's shutdown window, s.
    pub window_s: f64,
}

/// The state at the end of one second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tick {
    /// Seconds from the start (the end of second `t − 1`).
    pub t: u32,
    pub arrivals_per_s: f64,
    /// Replicas asked for.
    pub replicas: u32,
    /// Replicas serving.
    pub ready: u32,
    pub waiting: f64,
    pub active: f64,
    /// The wait a job arriving now would see: the backlog ÷ the ready workers' rate, s.
    pub wait_s: f64,
}

/// One change of the replica count.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScaleEvent {
    pub t: u32,
    pub from: u32,
    pub to: u32,
    /// Jobs the removed pods held (a scale-down), expected.
    pub held: f64,
    /// Of those, the ones the shutdown window does not cover.
    pub lost: f64,
}

/// A replay's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replay {
    pub name: String,
    pub ticks: Vec<Tick>,
    /// The largest backlog (waiting jobs) and when it was first reached.
    pub peak_waiting: (f64, u32),
    /// The longest wait and when.
    pub peak_wait_s: (f64, u32),
    pub events: Vec<ScaleEvent>,
    pub lost: f64,
    pub replicas_range: (u32, u32),
    /// Replicas × seconds asked for over the run: what the workers cost.
    pub replica_s: f64,
}

struct Controller<'a> {
    p: &'a Policy,
    recs: Vec<(u32, u32)>,
    changes: Vec<(u32, i64)>,
}

impl Controller<'_> {
    /// The count the metrics ask for, within the HPA's 10 % tolerance of the current one.
    fn raw(&self, current: u32, waiting: f64, active: f64) -> u32 {
        self.p
            .signals
            .iter()
            .filter(|(_, target)| *target > 0.0)
            .map(|(m, target)| {
                let v = match m {
                    Metric::Held => waiting + active,
                    Metric::Waiting => waiting,
                    Metric::Active => active,
                    Metric::Nothing => 0.0,
                    Metric::Weighted {
                        waiting: w,
                        active: a,
                        constant,
                    } => w * waiting + a * active + constant,
                };
                let ratio = v / (target * f64::from(current.max(1)));
                if current > 0 && (ratio - 1.0).abs() <= 0.1 {
                    current
                } else {
                    (v / target).ceil().max(0.0) as u32
                }
            })
            .max()
            .unwrap_or(current)
    }

    fn decide(&mut self, t: u32, current: u32, waiting: f64, active: f64) -> u32 {
        let raw = self.raw(current, waiting, active);
        let (up_cut, down_cut) = (
            i64::from(t) - i64::from(self.p.up.window_s),
            i64::from(t) - i64::from(self.p.down.window_s),
        );
        let (mut up, mut down) = (raw, raw);
        for (at, r) in &self.recs {
            if i64::from(*at) > up_cut {
                up = up.min(*r);
            }
            if i64::from(*at) > down_cut {
                down = down.max(*r);
            }
        }
        self.recs.push((t, raw));
        let mut want = current.max(up).min(down);
        if want > current {
            want = want.min(self.limit(t, current, true));
        } else if want < current {
            want = want.max(self.limit(t, current, false));
        }
        want.clamp(self.p.min.max(1), self.p.max.max(1))
    }

    /// The most (up) or least (down) replicas the behaviour's policies allow now.
    fn limit(&self, t: u32, current: u32, up: bool) -> u32 {
        let rules = if up { &self.p.up } else { &self.p.down };
        if rules.select == Select::Disabled {
            return current;
        }
        let limits = rules.policies.iter().map(|pol| {
            let moved: i64 = self
                .changes
                .iter()
                .filter(|(at, d)| {
                    i64::from(*at) > i64::from(t) - i64::from(pol.period_s) && (*d > 0) == up
                })
                .map(|(_, d)| d.abs())
                .sum();
            let c = i64::from(current);
            if up {
                let base = (c - moved).max(0);
                if pol.percent {
                    (base as f64 * (1.0 + f64::from(pol.value) / 100.0)).ceil() as i64
                } else {
                    base + i64::from(pol.value)
                }
            } else {
                let base = c + moved;
                if pol.percent {
                    (base as f64 * (1.0 - f64::from(pol.value) / 100.0)).ceil() as i64
                } else {
                    base - i64::from(pol.value)
                }
            }
        });
        let chosen = match (rules.select == Select::Max) == up {
            true => limits.max(),
            false => limits.min(),
        };
        chosen
            .unwrap_or(i64::from(current))
            .clamp(0, i64::from(u32::MAX)) as u32
    }
}

/// The controller's change from `replicas` to `to` at `t`: new pods serve once started; the
/// HPA does not know which pods are busy, so each removed one held its share of the active
/// executions, of which the drain loses part; pods not yet serving go first.
fn scaled(
    t: u32,
    (replicas, to): (u32, u32),
    ready_at: &mut Vec<u32>,
    active: f64,
    w: &Workload,
) -> ScaleEvent {
    let mut e = ScaleEvent {
        t,
        from: replicas,
        to,
        held: 0.0,
        lost: 0.0,
    };
    if to > replicas {
        ready_at.extend(std::iter::repeat_n(
            t + w.pod_start_s,
            (to - replicas) as usize,
        ));
    } else {
        let serving = ready_at.iter().filter(|r| **r <= t).count().max(1) as f64;
        e.held = active / serving * f64::from(replicas - to);
        e.lost = e.held * super::drain::lost_share(w.job_s, w.window_s);
        ready_at.sort_unstable();
        ready_at.truncate(to as usize);
    }
    e
}

/// Replays `arrivals` (per second) through the autoscaler `p` on workers `w`.
pub fn replay(arrivals: &[f64], p: &Policy, w: &Workload) -> Replay {
    let mu = w.per_worker_per_s.max(1e-9);
    let slots = (mu * w.job_s).max(1e-9);
    let first = arrivals.first().copied().unwrap_or(0.0);
    let mut c = Controller {
        p,
        recs: Vec::new(),
        changes: Vec::new(),
    };
    let mut replicas = c
        .raw(0, 0.0, first * w.job_s)
        .clamp(p.min.max(1), p.max.max(1));
    // Pods and when each serves; the first ones serve from the start.
    let mut ready_at: Vec<u32> = vec![0; replicas as usize];
    let (mut waiting, mut active) = (0.0f64, first * w.job_s);
    let mut out = Replay {
        name: p.name.clone(),
        ticks: Vec::with_capacity(arrivals.len()),
        peak_waiting: (0.0, 0),
        peak_wait_s: (0.0, 0),
        events: Vec::new(),
        lost: 0.0,
        replicas_range: (replicas, replicas),
        replica_s: 0.0,
    };
    for (t, &lambda) in arrivals.iter().enumerate() {
        let t = t as u32;
        if p.poll_s > 0 && t.is_multiple_of(p.poll_s) && t > 0 {
            let to = c.decide(t, replicas, waiting, active);
            if to != replicas {
                let e = scaled(t, (replicas, to), &mut ready_at, active, w);
                out.lost += e.lost;
                c.changes.push((t, i64::from(to) - i64::from(replicas)));
                replicas = to;
                out.replicas_range = (out.replicas_range.0.min(to), out.replicas_range.1.max(to));
                out.events.push(e);
            }
        }
        let ready = ready_at.iter().filter(|r| **r <= t).count() as u32;
        let capacity = f64::from(ready) * mu;
        let served = (waiting + lambda).min(capacity);
        waiting = (waiting + lambda - served).max(0.0);
        active = (served * w.job_s).min(f64::from(ready) * slots);
        let wait_s = if capacity > 0.0 {
            waiting / capacity
        } else if waiting > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        let tick = Tick {
            t: t + 1,
            arrivals_per_s: lambda,
            replicas,
            ready,
            waiting,
            active,
            wait_s,
        };
        if waiting > out.peak_waiting.0 {
            out.peak_waiting = (waiting, t + 1);
        }
        if wait_s > out.peak_wait_s.0 {
            out.peak_wait_s = (wait_s, t + 1);
        }
        out.replica_s += f64::from(replicas);
        out.ticks.push(tick);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-checked case: 2/s, a step to 10/s at 60 s, back to 2/s at 360 s; one
    /// worker serves 2/s with 1 s jobs (2 slots); KEDA polls every 30 s with a target of 2 jobs
    /// per replica (waiting + active), 1–10 replicas, Kubernetes' default behaviour (a 300 s
    /// scale-down window), pods ready at once.
    #[test]
    fn a_step_in_arrivals_gives_the_hand_computed_backlog_and_scale_times() {
        let mut arrivals = vec![2.0; 60];
        arrivals.extend(vec![10.0; 300]);
        arrivals.extend(vec![2.0; 400]);
        let p = Policy {
            name: "keda".into(),
            poll_s: 30,
            signals: vec![(Metric::Held, 2.0)],
            min: 1,
            max: 10,
            up: Rules::default_up(),
            down: Rules::default_down(),
        };
        let w = Workload {
            per_worker_per_s: 2.0,
            job_s: 1.0,
            pod_start_s: 0,
            window_s: 30.0,
        };
        let r = replay(&arrivals, &p, &w);
        // By hand: from 60 s one worker serves 2 of the 10 arriving each second, so the backlog
        // grows 8/s for 30 s: 240 at 90 s, when the poll asks ceil(242 ÷ 2) = 121 replicas and
        // the default scale-up policy allows 1 + max(4, 100 %) = 5; 5 workers serve exactly
        // the 10/s, the backlog holds at 240 until 120 s, when 10 workers drain it 10/s.
        assert_eq!(r.peak_waiting, (240.0, 90));
        // The longest wait: 240 jobs ahead of one worker's 2/s, just before the poll at 90 s.
        assert_eq!(r.peak_wait_s, (120.0, 90));
        let times: Vec<(u32, u32, u32)> = r.events.iter().map(|e| (e.t, e.from, e.to)).collect();
        // Down: the recommendations were 121 (90 s, 120 s), 5 (150–360 s), 1 (from 390 s); the
        // 300 s window keeps the highest, so 10 until 420 s (121 of 120 s leaves the window),
        // 5 until 660 s (5 of 360 s leaves it).
        assert_eq!(
            times,
            vec![(90, 1, 5), (120, 5, 10), (420, 10, 5), (660, 5, 1)]
        );
        // At risk at each scale-down: the 2 jobs in service spread over the pods, 5 of 10
        // removed hold 1; 4 of 5 hold 1.6. 1 s jobs against a 30 s window: none lost.
        assert!((r.events[2].held - 1.0).abs() < 1e-9 && (r.events[3].held - 1.6).abs() < 1e-9);
        assert_eq!(r.lost, 0.0);
        assert_eq!(r.replicas_range, (1, 10));
        // Drained by 144 s: 240 less 10 a second from 120 s.
        assert_eq!(r.ticks[143].waiting, 0.0);
        assert!(r.ticks[142].waiting > 0.0);
    }

    #[test]
    fn a_waiting_only_trigger_removes_busy_workers_and_loses_long_jobs() {
        // Steady 5/s on 10 s jobs: 50 in service, nothing waits. A trigger on the waiting list
        // alone reads 0 and scales to its minimum, removing busy workers; a 5 s window loses
        // half of what they held.
        let arrivals = vec![5.0; 400];
        let p = Policy {
            name: "waiting only".into(),
            poll_s: 30,
            signals: vec![(Metric::Waiting, 5.0)],
            min: 1,
            max: 20,
            up: Rules::default_up(),
            down: Rules {
                window_s: 60,
                ..Rules::default_down()
            },
        };
        let w = Workload {
            per_worker_per_s: 1.0,
            job_s: 10.0,
            pod_start_s: 0,
            window_s: 5.0,
        };
        let held = Policy {
            signals: vec![(Metric::Held, 10.0)],
            name: "held".into(),
            ..p.clone()
        };
        let r = replay(&arrivals, &held, &w);
        assert_eq!(r.events.len(), 0, "{:?}", r.events);
        let r = replay(&arrivals, &p, &w);
        assert!(r.lost > 0.0, "{:?}", r.events);
        let first_down = r.events.iter().find(|e| e.to < e.from).unwrap();
        assert!((first_down.lost - first_down.held * 0.5).abs() < 1e-9);
        assert!(r.peak_waiting.0 > 0.0);
    }
}
