//! Every integration test in one binary: cargo runs test binaries one after another, but the
//! tests of one binary side by side (`RUST_TEST_THREADS`, set in `.cargo/config.toml`). Most
//! of these tests wait on real stages, servers and containers rather than compute, so running
//! them together cuts the suite's wall time, and one binary is linked once instead of twenty.
//! Each file is still a module of its own (`cargo test --test integration k6::` runs one).

#[path = "adaptive.rs"]
mod adaptive;
#[path = "alerts.rs"]
mod alerts;
#[path = "audit.rs"]
mod audit;
#[path = "autoscaling.rs"]
mod autoscaling;
#[path = "cli.rs"]
mod cli;
mod common;
#[path = "compare.rs"]
mod compare;
#[path = "compose_example.rs"]
mod compose_example;
#[path = "diagnose.rs"]
mod diagnose;
#[path = "docker.rs"]
mod docker;
#[path = "docker_scale.rs"]
mod docker_scale;
#[path = "docs.rs"]
mod docs;
#[path = "drain.rs"]
mod drain;
#[path = "drain_compose.rs"]
mod drain_compose;
#[path = "fuzz.rs"]
mod fuzz;
#[path = "grafana.rs"]
mod grafana;
#[path = "history.rs"]
mod history;
#[path = "host_cpu.rs"]
mod host_cpu;
#[path = "hostile.rs"]
mod hostile;
#[path = "hostile_actuators.rs"]
mod hostile_actuators;
#[path = "hostile_commands.rs"]
mod hostile_commands;
#[path = "hostile_compare.rs"]
mod hostile_compare;
#[path = "hostile_files.rs"]
mod hostile_files;
#[path = "hostile_k6.rs"]
mod hostile_k6;
#[path = "hostile_postgres.rs"]
mod hostile_postgres;
#[path = "hostile_preflight.rs"]
mod hostile_preflight;
#[path = "hostile_servers.rs"]
mod hostile_servers;
#[path = "hostile_settings.rs"]
mod hostile_settings;
#[path = "hostile_topology.rs"]
mod hostile_topology;
#[path = "k6.rs"]
mod k6;
#[path = "k8s.rs"]
mod k8s;
#[path = "lab2.rs"]
mod lab2;
#[path = "memory.rs"]
mod memory;
#[path = "metrics_real.rs"]
mod metrics_real;
#[path = "outage.rs"]
mod outage;
#[path = "pasted_plan.rs"]
mod pasted_plan;
#[path = "postgres.rs"]
mod postgres;
#[path = "postgres_refused.rs"]
mod postgres_refused;
#[path = "postgres_restart.rs"]
mod postgres_restart;
#[path = "redis.rs"]
mod redis;
#[path = "report.rs"]
mod report;
#[path = "sim_fidelity.rs"]
mod sim_fidelity;
#[path = "sim_processes.rs"]
mod sim_processes;
#[path = "structure.rs"]
mod structure;
#[path = "structure_drills.rs"]
mod structure_drills;
#[path = "structure_limits.rs"]
mod structure_limits;
#[path = "sweep.rs"]
mod sweep;
#[path = "sweep_scale.rs"]
mod sweep_scale;
#[path = "workloads.rs"]
mod workloads;
