//! Mixes of workflows: kind i has a share w_i of the executions, a slot time S_i = W_i + C_i
//! and a Code time C_i (0 without a Code node: it never takes a runner task). The stack sees
//! the mean job — worker-bound ceiling slots ÷ Σ w_i S_i, runner-bound ceiling runner capacity
//! ÷ Σ w_i C_i — and each kind consumes its part of the capping resource: w_i S_i ÷ Σ w_j S_j
//! of the slots, w_i C_i ÷ Σ w_j C_j of the runner tasks.

use super::Job;
use serde::{Deserialize, Serialize};

/// One workflow kind of a mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kind {
    pub name: String,
    /// Share of the executions (the shares of a mix add up to 1).
    pub share: f64,
    /// Slot-only time W_i (s): external calls, nodes other than Code.
    pub wait_s: f64,
    /// Code time C_i (s).
    pub code_s: f64,
}

/// The mean job of a mix (overhead not included: it is the stack's, not the workflow's).
pub fn mean_job(kinds: &[Kind]) -> Job {
    let total: f64 = kinds.iter().map(|k| k.share).sum::<f64>().max(1e-12);
    Job {
        wait_s: kinds.iter().map(|k| k.share * k.wait_s).sum::<f64>() / total,
        code_s: kinds.iter().map(|k| k.share * k.code_s).sum::<f64>() / total,
        overhead_s: 0.0,
    }
}

/// What one kind takes of the slots and of the runner tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KindUse {
    pub name: String,
    pub share: f64,
    /// w_i (S_i + overhead) ÷ Σ: its part of the slot time.
    pub slot_share: f64,
    /// w_i C_i ÷ Σ: its part of the runner tasks (0 without a Code node).
    pub runner_share: f64,
}

pub fn uses(kinds: &[Kind], overhead_s: f64) -> Vec<KindUse> {
    let slot = |k: &Kind| k.share * (k.wait_s + k.code_s + overhead_s);
    let slots: f64 = kinds.iter().map(slot).sum();
    let code: f64 = kinds.iter().map(|k| k.share * k.code_s).sum();
    kinds
        .iter()
        .map(|k| KindUse {
            name: k.name.clone(),
            share: k.share,
            slot_share: if slots > 0.0 { slot(k) / slots } else { 0.0 },
            runner_share: if code > 0.0 {
                k.share * k.code_s / code
            } else {
                0.0
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{slots_and_runners, Capping, Limit, WorkerLimits};

    fn kinds(code_share: f64) -> Vec<Kind> {
        vec![
            Kind {
                name: "code".into(),
                share: code_share,
                wait_s: 0.0,
                code_s: 1.0,
            },
            Kind {
                name: "notify".into(),
                share: 1.0 - code_share,
                wait_s: 1.0,
                code_s: 0.0,
            },
        ]
    }

    #[test]
    fn the_same_settings_are_runner_bound_for_all_code_and_worker_bound_for_a_30_percent_mix() {
        let limits = [WorkerLimits {
            worker_concurrency: 5,
            runner_capacity: 3,
        }];
        let all = slots_and_runners(&limits, mean_job(&kinds(1.0)));
        assert_eq!(all.capping, Capping::Kind(Limit::RunnerLimit));
        assert!((all.ceiling - 3.0).abs() < 1e-9);
        let mix = slots_and_runners(&limits, mean_job(&kinds(0.3)));
        assert_eq!(mix.capping, Capping::Kind(Limit::WorkerConcurrency));
        // 5 slots ÷ Σ w S = 1 s; runner 3 ÷ Σ w C = 0.3 s = 10/s.
        assert!((mix.ceiling - 5.0).abs() < 1e-9);
        assert!((mix.runner_bound() - 10.0).abs() < 1e-9);
        let u = uses(&kinds(0.3), 0.0);
        assert!((u[0].runner_share - 1.0).abs() < 1e-12);
        assert_eq!(u[1].runner_share, 0.0);
        assert!((u[1].slot_share - 0.7).abs() < 1e-12);
    }
}
