//! The queue on a real Redis: the simulator's main and workers use Bull's keys, and a sweep's
//! `--redis` reads the queue from there (read-only), finer than n8n's gauges.
//! Skips with a printed reason when redis-server is not installed (.ci/run installs it).

use crate::common::*;
use n8ncap::wire::resp::{Conn, RedisUrl};
use std::process::{Command, Stdio};
use std::time::Duration;

fn start_redis() -> Option<(ChildGuard, u16)> {
    if !have_command("redis-server", "--version", "apt-get install redis-server") {
        return None;
    }
    let port = free_port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
            "--bind",
            "127.0.0.1",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("start redis-server");
    Some((ChildGuard(child), port))
}

async fn wait_redis(url: &RedisUrl) -> Conn {
    for _ in 0..100 {
        if let Ok(mut c) = Conn::open(url).await {
            if c.cmd(&["PING"]).await.is_ok() {
                return c;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("redis did not start");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 14 s): a simulated stack on a real Redis"]
async fn queue_on_redis_keeps_the_fidelity_and_the_sweep_reads_it() {
    let Some((_redis, rport)) = start_redis() else {
        return;
    };
    let redis_url = format!("redis://127.0.0.1:{rport}");
    let url = RedisUrl::parse(&redis_url).unwrap();
    let mut probe = wait_redis(&url).await;
    let (http, health, broker) = (free_port(), free_port(), free_port());
    let _main = spawn_role(
        &["sim", "main", "--redis", &redis_url],
        &[
            ("N8N_PORT", http.to_string()),
            ("N8N_LISTEN_ADDRESS", "127.0.0.1".into()),
            ("N8N_METRICS", "true".into()),
            ("N8N_METRICS_INCLUDE_QUEUE_METRICS", "true".into()),
        ],
    );
    let _worker = spawn_role(
        &[
            "sim",
            "worker",
            "--concurrency",
            "15",
            "--redis",
            &redis_url,
        ],
        &[
            ("QUEUE_HEALTH_CHECK_PORT", health.to_string()),
            ("N8N_RUNNERS_MODE", "external".to_string()),
            ("N8N_RUNNERS_BROKER_PORT", broker.to_string()),
        ],
    );
    let _runner = spawn_role(
        &["sim", "runner"],
        &[
            (
                "N8N_RUNNERS_TASK_BROKER_URI",
                format!("http://127.0.0.1:{broker}"),
            ),
            ("N8N_RUNNERS_MAX_CONCURRENCY", "5".into()),
        ],
    );
    wait_http_ok(&format!("http://127.0.0.1:{health}/healthz/readiness")).await;
    for _ in 0..100 {
        if n8ncap::sim::fetch_runner_count(&format!("http://127.0.0.1:{health}/sim/runners"))
            .await
            .unwrap_or(0)
            == 1
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let webhook = format!("http://127.0.0.1:{http}/webhook/load");
    let mut profile = closed_profile(
        &webhook,
        &[20],
        serde_json::json!({"sleep_ms": 600}),
        "4s",
        "14s",
    );
    profile.name = "redis".into();
    let sweep_task = tokio::spawn(async move {
        let (s, _) = n8ncap::load::run::run_sweep(
            n8ncap::load::run::SweepOptions {
                observer: n8ncap::observe::watch::observer(
                    Vec::new(),
                    None,
                    Some((
                        RedisUrl::parse(&format!("redis://127.0.0.1:{rport}")).unwrap(),
                        "bull".into(),
                    )),
                    Duration::from_millis(500),
                    None,
                )
                .await,
                ..n8ncap::load::run::SweepOptions::new(profile)
            },
            std::future::pending(),
        )
        .await
        .unwrap();
        s
    });
    // Mid-run, Bull's lists hold what n8n's gauges would show: 15 active, the rest of the 20
    // waiting. Read for 3 s: at any one moment a busy host may hold some of the 20 in main's
    // intake and response, outside Redis, but never more in Redis than in flight or more active
    // than slots.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let (mut wait_max, mut active_max) = (0, 0);
    for _ in 0..30 {
        let mut len = Vec::new();
        for key in ["bull:jobs:wait", "bull:jobs:active"] {
            len.push(probe.cmd(&["LLEN", key]).await.unwrap().as_int().unwrap());
        }
        let (wait, active) = (len[0], len[1]);
        assert!(active <= 15, "bull:jobs:active = {active} on 15 slots");
        assert!(
            wait + active <= 20,
            "{wait} waiting + {active} active, 20 in flight"
        );
        wait_max = wait_max.max(wait);
        active_max = active_max.max(active);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(active_max, 15, "bull:jobs:active");
    assert!(
        (3..=5).contains(&wait_max),
        "bull:jobs:wait at most {wait_max}"
    );
    let s = sweep_task.await.unwrap();
    let st = &s.stages[0];
    assert!(st.valid, "{:?}", st.invalid_reasons);
    // 8.33 req/s idle (5 tasks ÷ 0.6 s); held against the runner's task time this run measured.
    let served = served_at(
        &[format!("http://127.0.0.1:{health}/sim/runners")],
        &format!("http://127.0.0.1:{http}/metrics"),
    )
    .await;
    assert!(
        within(st.throughput_rps, 5.0 / served.task_s, 0.05),
        "{:.2} req/s, expected {:.2} ±5 % from {served:?}",
        st.throughput_rps,
        5.0 / served.task_s
    );
    assert!(
        st.throughput_rps <= 5.0 / 0.6 * 1.02,
        "{:.2}",
        st.throughput_rps
    );
    let q = st.queue.as_ref().expect("queue read from redis");
    assert_eq!(q.source, n8ncap::record::stage::QueueSource::Redis);
    assert!(q.samples >= 15, "{} samples at 500 ms", q.samples);
    // Whenever a job waited every slot was taken: 15, read from Bull's lists, less a slot
    // caught between its job's end and the next job's pickup, which a busy host stretches
    // (a cold run beside `stress-ng --cpu 0` read 14.57: 9 of 21 samples caught one such).
    let full = q.active_while_waiting.expect("jobs waited");
    assert!((14.0..=15.0).contains(&full), "{q:?}");
    assert!(q.active_mean <= 15.0 && q.active_max == 15.0, "{q:?}");
    assert!((3.5..=5.3).contains(&q.waiting_mean), "{q:?}");
    assert!(!q.coarse);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_going_away_leaves_gaps_and_the_sweep_goes_on() {
    let Some((redis, rport)) = start_redis() else {
        return;
    };
    let url = RedisUrl::parse(&format!("redis://127.0.0.1:{rport}")).unwrap();
    let _ = wait_redis(&url).await;
    let stack = n8ncap::sim::Stack::start(n8ncap::sim::StackConfig::default())
        .await
        .unwrap();
    let profile = closed_profile(
        &stack.webhook_url,
        &[2, 2],
        serde_json::json!({"sleep_ms": 50}),
        "500ms",
        "2s",
    );
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(2600)).await;
        drop(redis);
    });
    let (s, _) = n8ncap::load::run::run_sweep(
        n8ncap::load::run::SweepOptions {
            observer: n8ncap::observe::watch::observer(
                Vec::new(),
                None,
                Some((url, "bull".into())),
                Duration::from_millis(250),
                None,
            )
            .await,
            ..n8ncap::load::run::SweepOptions::new(profile)
        },
        std::future::pending(),
    )
    .await
    .unwrap();
    killer.await.unwrap();
    assert_eq!(s.stages.len(), 2);
    let q1 = s.stages[0].queue.as_ref().unwrap();
    let q2 = s.stages[1].queue.as_ref().unwrap();
    assert!(q1.samples > 0 && q1.gaps == 0, "{q1:?}");
    assert!(q2.gaps > 0, "{q2:?}");
    assert!(s.stages[1].ok > 10, "the load went on");
}

#[test]
fn bad_redis_url_exits_2() {
    let out = Command::new(bin())
        .args([
            "sweep",
            "--url",
            "http://127.0.0.1:1/webhook/load",
            "--redis",
            "localhost:6379",
            "--no-out",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("redis://"));
}

/// `sim n8n` (the n8n command line in a compose stack) finds the real Redis that
/// QUEUE_BULL_REDIS_HOST names and keeps the queue there, as n8n does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_n8n_uses_the_redis_its_variables_name() {
    let Some((_redis, rport)) = start_redis() else {
        return;
    };
    let url = RedisUrl::parse(&format!("redis://127.0.0.1:{rport}")).unwrap();
    let mut probe = wait_redis(&url).await;
    let (http, health, broker) = (free_port(), free_port(), free_port());
    let redis_env = || {
        vec![
            ("QUEUE_BULL_REDIS_HOST", "127.0.0.1".to_string()),
            ("QUEUE_BULL_REDIS_PORT", rport.to_string()),
            ("EXECUTIONS_MODE", "queue".to_string()),
        ]
    };
    let mut main_env = redis_env();
    main_env.extend([
        ("N8N_PORT", http.to_string()),
        ("N8N_LISTEN_ADDRESS", "127.0.0.1".to_string()),
    ]);
    let _main = spawn_role(&["sim", "n8n"], &main_env);
    let mut worker_env = redis_env();
    worker_env.extend([
        ("QUEUE_HEALTH_CHECK_PORT", health.to_string()),
        ("N8N_RUNNERS_MODE", "external".to_string()),
        ("N8N_RUNNERS_BROKER_PORT", broker.to_string()),
    ]);
    let _worker = spawn_role(&["sim", "n8n", "worker", "--concurrency=3"], &worker_env);
    let _runner = spawn_role(
        &["sim", "runner"],
        &[(
            "N8N_RUNNERS_TASK_BROKER_URI",
            format!("http://127.0.0.1:{broker}"),
        )],
    );
    wait_http_ok(&format!("http://127.0.0.1:{health}/healthz/readiness")).await;
    let webhook = format!("http://127.0.0.1:{http}/webhook/load");
    let profile = closed_profile(
        &webhook,
        &[2],
        serde_json::json!({"sleep_ms": 100}),
        "1s",
        "3s",
    );
    let load = tokio::spawn(sweep(profile, None));
    // The jobs go through Redis under Bull's keys while they run (the worker deletes each hash
    // when its job is done): wait for one to be seen, for the state and not a moment.
    let mut seen = 0;
    while seen == 0 && !load.is_finished() {
        seen = match probe.cmd(&["KEYS", "bull:jobs:*"]).await.unwrap() {
            n8ncap::wire::resp::Value::Array(a) => a.len(),
            other => panic!("{other:?}"),
        };
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let summary = load.await.unwrap();
    let st = &summary.stages[0];
    assert!(st.valid && st.ok > 5, "{st:?}");
    assert!(seen > 0, "no Bull keys in Redis while the jobs ran");
}

/// Starts or stops workers until N run, and returns at once: a new worker starts `DELAY`
/// seconds later, as pods scheduled by `kubectl scale` do.
const LATE_SCALE_SH: &str = r#"#!/usr/bin/env bash
set -u
N=$1
read -r -a HEALTH <<< "$HEALTH_PORTS"
read -r -a BROKER <<< "$BROKER_PORTS"
for i in 1 2 3; do
  if [ "$i" -le "$N" ]; then
    if ! kill -0 "$(cat "$STATE/w$i.pid" 2>/dev/null)" 2>/dev/null; then
      # Its own session: the worker outlives the command that started it.
      setsid bash -c 'sleep "$0"; exec "$@"' "${DELAY:-0}" env -i PATH="$PATH" \
        QUEUE_BULL_REDIS_HOST=127.0.0.1 QUEUE_BULL_REDIS_PORT="$REDIS_PORT" EXECUTIONS_MODE=queue \
        QUEUE_HEALTH_CHECK_PORT="${HEALTH[$((i-1))]}" N8N_RUNNERS_BROKER_PORT="${BROKER[$((i-1))]}" \
        SIM_WORKER_CPU_MS=0 SIM_RUNNER_CPU_MS=0 "$BIN" sim n8n worker --concurrency=2 \
        >"$STATE/w$i.log" 2>&1 < /dev/null &
      echo $! > "$STATE/w$i.pid"
    fi
  elif [ -f "$STATE/w$i.pid" ]; then
    # Gone before the script returns (its ports free for a worker started again).
    p=$(cat "$STATE/w$i.pid"); kill "$p" 2>/dev/null
    for _ in $(seq 1 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
    rm -f "$STATE/w$i.pid"
  fi
done
"#;

/// A scale command that returns before its worker runs (`kubectl scale`): with the queue's
/// Redis the sweep waits until the new worker is connected to the queue (Bull's worker client
/// in `CLIENT LIST`) and measures 2 workers as 2 — not a stage where one of them was missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 30 s): a scale sweep on a real Redis"]
async fn a_scale_sweep_waits_for_late_workers_to_join_the_queue_in_redis() {
    let Some((_redis, rport)) = start_redis() else {
        return;
    };
    let url = RedisUrl::parse(&format!("redis://127.0.0.1:{rport}")).unwrap();
    let mut probe = wait_redis(&url).await;
    let http = free_port();
    let _main = spawn_role(
        &["sim", "n8n"],
        &[
            ("QUEUE_BULL_REDIS_HOST", "127.0.0.1".to_string()),
            ("QUEUE_BULL_REDIS_PORT", rport.to_string()),
            ("EXECUTIONS_MODE", "queue".to_string()),
            ("N8N_PORT", http.to_string()),
            ("N8N_LISTEN_ADDRESS", "127.0.0.1".to_string()),
            ("N8N_METRICS", "true".to_string()),
            ("N8N_METRICS_INCLUDE_QUEUE_METRICS", "true".to_string()),
            ("N8N_METRICS_QUEUE_METRICS_INTERVAL", "1".to_string()),
        ],
    );
    let dir = fresh_dir("late-workers");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("scale.sh"), LATE_SCALE_SH).unwrap();
    let ports = || (0..3).map(|_| free_port().to_string()).collect::<Vec<_>>();
    let (health, broker) = (ports(), ports());
    let env = [
        ("STATE", dir.display().to_string()),
        ("BIN", bin().to_string()),
        ("REDIS_PORT", rport.to_string()),
        ("HEALTH_PORTS", health.join(" ")),
        ("BROKER_PORTS", broker.join(" ")),
    ];
    let script = |n: &str, delay: &str| {
        let mut c = Command::new("bash");
        c.arg(dir.join("scale.sh")).arg(n).env("DELAY", delay);
        c.envs(env.iter().map(|(k, v)| (k, v)));
        c
    };
    // Every worker stopped however the test ends.
    struct StopAll(Command);
    impl Drop for StopAll {
        fn drop(&mut self) {
            let _ = self.0.status();
        }
    }
    let _stop = StopAll(script("0", "0"));
    // One worker at the start, connected before the sweep.
    assert!(script("1", "0").status().unwrap().success());
    let name = "bull:am9icw==";
    for _ in 0..200 {
        let list = probe
            .cmd(&["CLIENT", "LIST"])
            .await
            .unwrap()
            .as_str()
            .unwrap();
        if list.contains(name) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let webhook = format!("http://127.0.0.1:{http}/webhook/load");
    let metrics = format!("main=http://127.0.0.1:{http}/metrics");
    let cmd = format!("bash {} {{workers}}", dir.join("scale.sh").display());
    let out = dir.join("run");
    let o = Command::new(bin())
        .args([
            "sweep",
            "--url",
            &webhook,
            "--vus",
            "8",
            "--warmup",
            "2s",
            "--stage-duration",
            "6s",
            "--body",
            r#"{"sleep_ms":300,"code":false}"#,
            "--metrics",
            &metrics,
            "--worker-concurrency",
            "2",
            "--workers",
            "1,2",
            "--scale-cmd",
            &cmd,
            "--scale-settle",
            "0s",
            "--redis",
            url.shown().as_str(),
            "--queue-metrics-interval",
            "1",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("DELAY", "8")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&o.stderr));
    });
    assert_eq!(o.status.code(), Some(0), "{v}");
    // No --restore-workers: the count to return to was read from the queue (issue #63).
    assert_eq!(v["original_workers"], 1, "{v}");
    assert!(
        v["original_source"]
            .as_str()
            .is_some_and(|s| s.contains("CLIENT LIST")),
        "{v}"
    );
    let steps = v["steps"].as_array().unwrap();
    // Count 1: its worker was already connected; count 2: the new one started 8 s after the
    // command returned — after the warm-up and the stage, had the sweep not waited for it.
    assert_eq!(steps[0]["queue_workers"], 1, "{v}");
    assert_eq!(steps[1]["queue_workers"], 2, "{v}");
    let after = steps[1]["joined_after_s"].as_f64().unwrap();
    assert!(
        after >= 2.0,
        "joined after {after} s: the worker starts 3 s late"
    );
    // The return is read back: exactly the one worker left connected to the queue.
    assert_eq!(steps[2]["queue_workers"], 1, "{v}");
    assert!(steps[2]["failure"].is_null(), "{v}");
    // Both workers took jobs through the stage: 2 slots each, 0.3 s jobs (6.7/s a worker).
    let points = v["scaling"]["points"].as_array().unwrap();
    let c = |n: u64| {
        points.iter().find(|p| p["workers"] == n).unwrap()["ceiling"][0]
            .as_f64()
            .unwrap()
    };
    // One worker's 2 slots of jobs that sleep 0.3 s serve at most 6.7/s: a ceiling at two
    // workers above that by a tenth was served by both (a busy host slows jobs, never speeds
    // them; measured 6.1 and 12.2/s quiet).
    let one = 2.0 / 0.3;
    assert!(
        c(1) <= one * 1.02 && c(2) > one * 1.1,
        "1 worker {}, 2 workers {}: {v}",
        c(1),
        c(2)
    );
    assert!(points.iter().all(|p| p["not_joined"].is_null()), "{v}");
}

/// Redis over TLS (`rediss://`, managed Redis with in-transit encryption): a real redis-server
/// on a TLS port with a certificate a CA made here signed for 127.0.0.1 answers n8ncap's client
/// with the CA given (`ssl_ca_certs`) and without a check (`ssl_cert_reqs=none`), reads a Bull
/// list through it, and refuses another CA naming the certificate, never the password; a
/// plain `redis://` to the TLS port gets no answer it can read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_over_tls_is_read_with_the_ca_and_a_wrong_ca_is_refused() {
    if !have_command("redis-server", "--version", "apt-get install redis-server") {
        return;
    }
    let dir = fresh_dir("redis-tls");
    let (ca, cert, key, other) = tls_files(&dir, &["127.0.0.1"]);
    let port = free_port();
    let _redis = ChildGuard(
        Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--tls-cert-file", &cert, "--tls-key-file", &key])
            .args(["--tls-ca-cert-file", &ca, "--tls-auth-clients", "no"])
            .args([
                "--requirepass",
                "tls-c41d",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--bind", "127.0.0.1"])
            .stdout(Stdio::null())
            .spawn()
            .expect("start redis-server"),
    );
    let url =
        |q: &str| RedisUrl::parse(&format!("rediss://:tls-c41d@127.0.0.1:{port}/0?{q}")).unwrap();
    let mut c = wait_redis(&url(&format!("ssl_ca_certs={ca}"))).await;
    c.cmd(&["RPUSH", "bull:jobs:wait", "1", "2", "3"])
        .await
        .unwrap();
    let n = c.cmd(&["LLEN", "bull:jobs:wait"]).await.unwrap().as_int();
    assert_eq!(n, Some(3));
    let mut unchecked = Conn::open(&url("ssl_cert_reqs=none")).await.unwrap();
    assert_eq!(
        unchecked
            .cmd(&["LLEN", "bull:jobs:wait"])
            .await
            .unwrap()
            .as_int(),
        Some(3)
    );
    let e = Conn::open(&url(&format!("ssl_ca_certs={other}")))
        .await
        .err()
        .expect("another CA is refused")
        .to_string();
    assert!(e.contains("TLS") && e.contains("ssl_ca_certs"), "{e}");
    assert!(!e.contains("tls-c41d"), "{e}");
    let plain = RedisUrl::parse(&format!("redis://:tls-c41d@127.0.0.1:{port}/0")).unwrap();
    let answered = match Conn::open(&plain).await {
        Ok(mut p) => p.cmd(&["PING"]).await.is_ok(),
        Err(_) => false,
    };
    assert!(!answered, "a plain connection to a TLS port was answered");
}
