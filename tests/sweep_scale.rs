//! `sweep --workers 1,2,4 --scale-cmd`: the simulator's roles as processes, scaled by a shell
//! script the way an operator's command scales a deployment (worker and runner as a pair, the
//! runner's broker URI at its own worker). The ceiling is measured at each count, the runs are
//! judged together, and the deployment is back at the count it had however the sweep ends.

use crate::common::*;
use std::path::Path;

/// Starts or stops worker/runner pairs until N run; returns once each new worker's runner is
/// attached (as `kubectl rollout status` returns once pods are ready). Exits 3 for `FAIL_AT`.
const SCALE_SH: &str = r#"#!/usr/bin/env bash
set -u
N=$1
[ "$N" = "${FAIL_AT:-none}" ] && { echo "quota exceeded for $N workers" >&2; exit 3; }
read -r -a HEALTH <<< "$HEALTH_PORTS"
read -r -a BROKER <<< "$BROKER_PORTS"
for i in $(seq 1 ${#HEALTH[@]}); do
  h=${HEALTH[$((i-1))]}; b=${BROKER[$((i-1))]}
  if [ "$i" -le "$N" ]; then
    if ! kill -0 "$(cat "$STATE/w$i.pid" 2>/dev/null)" 2>/dev/null; then
      env -i PATH="$PATH" QUEUE_BULL_REDIS_HOST=127.0.0.1 QUEUE_BULL_REDIS_PORT="$QUEUE" \
        QUEUE_HEALTH_CHECK_PORT="$h" N8N_WORKER_SERVER_ADDRESS=127.0.0.1 \
        N8N_RUNNERS_MODE=external N8N_RUNNERS_BROKER_PORT="$b" \
        N8N_RUNNERS_BROKER_LISTEN_ADDRESS=127.0.0.1 N8N_RUNNERS_AUTH_TOKEN=t N8N_METRICS=true \
        SIM_WORKER_CPU_MS=0 ${WORKER_ENV:-} setsid "$BIN" sim worker --concurrency ${CONCURRENCY:-2} >"$STATE/w$i.log" 2>&1 < /dev/null &
      echo $! > "$STATE/w$i.pid"
      env -i PATH="$PATH" N8N_RUNNERS_TASK_BROKER_URI="http://127.0.0.1:$b" \
        N8N_RUNNERS_MAX_CONCURRENCY=5 N8N_RUNNERS_AUTH_TOKEN=t SIM_RUNNER_CPU_MS="${RUNNER_CPU_MS:-0}" \
        setsid "$BIN" sim runner >"$STATE/r$i.log" 2>&1 < /dev/null &
      echo $! > "$STATE/r$i.pid"
      for _ in $(seq 1 2400); do
        curl -sf "http://127.0.0.1:$h/sim/runners" | grep -q '"runners":\[{' && break
        sleep 0.05
      done
      echo "worker $i up"
    fi
  else
    # Stopped and gone (its ports free) before the script returns: a pair started again at once
    # would otherwise find its worker's port still held by the one shutting down.
    for f in "$STATE/w$i.pid" "$STATE/r$i.pid"; do
      if [ -f "$f" ]; then
        p=$(cat "$f"); kill "$p" 2>/dev/null
        for _ in $(seq 1 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
        rm -f "$f"
      fi
    done
  fi
done
"#;

struct Deployment {
    _main: ChildGuard,
    webhook: String,
    metrics: String,
    dir: std::path::PathBuf,
    env: Vec<(String, String)>,
    /// Each count's stage (after a 2 s warm-up).
    stage: &'static str,
}

impl Drop for Deployment {
    fn drop(&mut self) {
        for e in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            if e.path().extension().is_some_and(|x| x == "pid") {
                if let Ok(pid) = std::fs::read_to_string(e.path()) {
                    let _ = std::process::Command::new("kill").arg(pid.trim()).status();
                }
            }
        }
    }
}

impl Deployment {
    /// main alone, then the script brings one worker pair up: the count "running now".
    async fn start(tag: &str, most: usize) -> Deployment {
        Deployment::start_with(tag, most, 0).await
    }

    /// The same, main burning `main_cpu_ms` of CPU per request on its one thread (n8n's intake).
    async fn start_with(tag: &str, most: usize, main_cpu_ms: u32) -> Deployment {
        Deployment::start_env(tag, most, main_cpu_ms, &[]).await
    }

    /// The same, main and every worker given `shared` (`NAME=value`, no spaces) beside their own.
    async fn start_env(
        tag: &str,
        most: usize,
        main_cpu_ms: u32,
        shared: &[(&str, String)],
    ) -> Deployment {
        let (http, queue) = (free_port(), free_port());
        let main = spawn_sim_main_with(http, queue, main_cpu_ms, shared);
        let dir = scratch().join(tag);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("scale.sh"), SCALE_SH).unwrap();
        let ports = |_| {
            (0..most)
                .map(|_| free_port().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let words: Vec<String> = shared.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let env = vec![
            ("WORKER_ENV".to_string(), words.join(" ")),
            ("STATE".to_string(), dir.display().to_string()),
            ("BIN".into(), bin().to_string()),
            ("QUEUE".into(), queue.to_string()),
            ("HEALTH_PORTS".into(), ports(0)),
            ("BROKER_PORTS".into(), ports(1)),
        ];
        let d = Deployment {
            _main: main,
            webhook: format!("http://127.0.0.1:{http}/webhook/load"),
            metrics: format!("http://127.0.0.1:{http}/metrics"),
            dir,
            env,
            stage: "8s",
        };
        wait_http_ok(&d.metrics).await;
        let up = d.script().arg("1").status().unwrap();
        assert!(up.success());
        d
    }

    fn script(&self) -> std::process::Command {
        let mut c = std::process::Command::new("bash");
        c.arg(self.dir.join("scale.sh"));
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    /// Worker pairs whose processes run now.
    fn running(&self) -> Vec<usize> {
        (1..=4)
            .filter(|i| {
                std::fs::read_to_string(self.dir.join(format!("w{i}.pid")))
                    .ok()
                    .and_then(|p| p.trim().parse::<i32>().ok())
                    .is_some_and(alive)
            })
            .collect()
    }

    fn sweep(&self, counts: &str, out: &Path, fail_at: Option<&str>) -> (i32, serde_json::Value) {
        let o = self.sweep_command(counts, out, fail_at).output().unwrap();
        let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        });
        (o.status.code().unwrap_or(-1), v)
    }

    fn sweep_command(
        &self,
        counts: &str,
        out: &Path,
        fail_at: Option<&str>,
    ) -> std::process::Command {
        let cmd = format!("bash {} {{workers}}", self.dir.join("scale.sh").display());
        let mut c = std::process::Command::new(bin());
        c.args([
            "sweep",
            "--url",
            &self.webhook,
            "--vus",
            "16",
            "--warmup",
            "2s",
            "--stage-duration",
            self.stage,
            "--body",
            r#"{"sleep_ms":400}"#,
            "--metrics",
            &format!("main={}", self.metrics),
            "--worker-concurrency",
            "2",
            "--runner-limit",
            "5",
            "--workers",
            counts,
            "--scale-cmd",
            &cmd,
            "--restore-workers",
            "1",
            // The script returns once each new runner is attached; a starved machine (a cold
            // clone beside a CPU hog) once measured 2 workers before the second took a job.
            "--scale-settle",
            "3s",
            "--queue-metrics-interval",
            "1",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]);
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(f) = fail_at {
            c.env("FAIL_AT", f);
        }
        c
    }
}

/// `kill -0 PID`: the process exists.
fn alive(pid: i32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

pub(crate) fn ceiling(v: &serde_json::Value, workers: u64) -> f64 {
    v["scaling"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["workers"] == workers)
        .unwrap_or_else(|| panic!("no point at {workers}: {}", v["scaling"]))["ceiling"][0]
        .as_f64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 54 s): a scale sweep of simulated workers"]
async fn a_scale_sweep_measures_each_count_and_returns_to_the_one_it_found() {
    if !have_command("curl", "--version", "apt install curl") {
        return;
    }
    let d = Deployment::start("scale-sweep", 4).await;
    assert_eq!(d.running(), vec![1]);
    let out = d.dir.join("run");
    let (code, v) = d.sweep("1,2,4", &out, None);
    assert_eq!(code, 0, "{v}");
    // Scaled to 1, 2 and 4, then back to 1, each step's command succeeded.
    let steps = v["steps"].as_array().unwrap();
    let counts: Vec<_> = steps
        .iter()
        .map(|s| s["workers"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, vec![1, 2, 4, 1]);
    assert!(steps.iter().all(|s| s["exit_code"] == 0), "{v}");
    assert_eq!(steps[3]["restore"], true);
    assert_eq!(d.running(), vec![1], "back at the count it found");
    // Each count's run is saved with its count, and exactly that many workers took jobs: with
    // 16 in flight main's gauge saw every slot taken, 2 per worker, and never more.
    for n in [1, 2, 4] {
        let s = n8ncap::record::dir::load_summary(&out.join(format!("w{n}"))).unwrap();
        assert_eq!(s.settings.unwrap().workers.unwrap().value, n);
        let active = s.stages[0].queue.as_ref().unwrap().active_max;
        assert_eq!(active, 2.0 * n as f64, "slots taken at {n} workers");
    }
    // The ceilings grow with the slots (each count measured in its own moment of a shared
    // machine, so the ratios are bounded loosely) and never pass 2 slots ÷ 0.4 s per worker.
    let (c1, c2, c4) = (ceiling(&v, 1), ceiling(&v, 2), ceiling(&v, 4));
    assert!(
        c1 <= 2.0 / 0.4 * 1.05,
        "one worker's 2 slots hold at most 5/s: {c1}"
    );
    assert!(c2 <= 2.0 * 2.0 / 0.4 * 1.05 && c4 <= 4.0 * 2.0 / 0.4 * 1.05);
    assert!(c2 > 1.4 * c1 && c4 > 1.4 * c2, "{c1} → {c2} → {c4}");
    // The law is fitted, and no shared limit was reached: main's CPU per execution is a few ms
    // (on a machine whose CPU other work takes, `host-shared` at 4 workers, the host is).
    assert!(v["scaling"]["fit"]["lambda_per_s"].as_f64().unwrap() > 0.0);
    let starved = n8ncap::record::dir::load_summary(&out.join("w4"))
        .unwrap()
        .diagnosis
        .is_some_and(|d| d.findings.iter().any(|f| f.id == "host-shared"));
    let shared = v["scaling"]["shared"].as_array().unwrap();
    assert!(
        shared
            .iter()
            .all(|l| l["reached"] == false || (starved && l["kind"] == "host_cpu")),
        "{shared:?}"
    );
    // Nothing shared in the way, N workers hold within 10 % of N times one worker's ceiling.
    if !starved {
        for (n, c) in [(2.0, c2), (4.0, c4)] {
            assert!(
                c >= 0.9 * n * c1,
                "{n} workers: {c}/s against {c1}/s for one"
            );
        }
    }
    // scale.json holds what the output said.
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("scale.json")).unwrap()).unwrap();
    assert_eq!(saved, v);
    // The plan for 12/s from the measured scaling, read from the directory moved elsewhere: a
    // ceiling of 18/s needed, the fewest workers whose fitted ceiling holds it, each keeping the
    // runs' 2 slots and runner limit 5, with the Postgres connections their pools hold.
    let moved = d.dir.join("moved");
    std::fs::rename(&out, &moved).unwrap();
    let r = run_json(&[
        "recommend",
        moved.to_str().unwrap(),
        "--target-rate",
        "12",
        "--json",
    ]);
    let p = &r["plan"];
    assert!((p["needed_ceiling_per_s"].as_f64().unwrap() - 18.0).abs() < 1e-9);
    let n = p["workers"].as_u64().unwrap();
    assert!((3..=5).contains(&n), "{p}");
    assert!(
        p["predicted_ceiling_per_s"].as_f64().unwrap() >= 18.0,
        "{p}"
    );
    assert!(
        n as f64 * c1 >= 18.0 * 0.85,
        "{n} workers of {c1}/s for 18/s"
    );
    assert_eq!(p["per_worker"]["worker_concurrency"], 2);
    assert_eq!(p["per_worker"]["runner_limit"], 5);
    assert_eq!(p["postgres_connections"].as_u64().unwrap(), (n + 1) * 2);
    // One run is no scaling: refused, exit 2.
    let o = std::process::Command::new(bin())
        .args(["recommend", moved.join("w1").to_str().unwrap()])
        .args(["--target-rate", "12"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 30 s): a scale sweep of simulated workers"]
async fn a_failing_scale_command_stops_the_sweep_keeps_what_it_measured_and_restores() {
    if !have_command("curl", "--version", "apt install curl") {
        return;
    }
    let d = Deployment::start("scale-sweep-fail", 4).await;
    let out = d.dir.join("run");
    let (code, v) = d.sweep("1,2,4", &out, Some("4"));
    assert_eq!(code, 1, "{v}");
    let steps = v["steps"].as_array().unwrap();
    let codes: Vec<_> = steps.iter().map(|s| s["exit_code"].clone()).collect();
    assert_eq!(codes, vec![0, 0, 3, 0], "{v}");
    assert!(steps[2]["output"]
        .as_str()
        .unwrap()
        .contains("quota exceeded for 4"));
    // The two counts measured are judged together; the deployment is back at one worker.
    assert_eq!(v["scaling"]["points"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
    assert_eq!(d.running(), vec![1]);
    // Bad input is refused before any command runs: a count given twice.
    let before = std::fs::read_dir(&d.dir).unwrap().count();
    let o = std::process::Command::new(bin())
        .args(["sweep", "--url", &d.webhook, "--workers", "2,2"])
        .args([
            "--scale-cmd",
            "touch ran-{workers}",
            "--restore-workers",
            "1",
        ])
        .current_dir(&d.dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read_dir(&d.dir).unwrap().count(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 23 s): a scale sweep of simulated workers"]
async fn a_scale_sweep_stopped_midway_keeps_its_runs_and_restores() {
    if !have_command("curl", "--version", "apt install curl") {
        return;
    }
    let d = Deployment::start("scale-sweep-stop", 4).await;
    let out = d.dir.join("run");
    let child = d
        .sweep_command("1,2,4", &out, None)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Stopped once the first count's run is saved and the second is under way.
    let book = out.join("scale.json");
    let mut seen = false;
    for _ in 0..2400 {
        let v: Option<serde_json::Value> = std::fs::read(&book)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if v.is_some_and(|v| v["steps"].as_array().is_some_and(|s| s.len() == 2)) {
            seen = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(seen, "the sweep never reached its second count");
    assert_eq!(d.running(), vec![1, 2]);
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ended"], "interrupted");
    // The first count's run and the interrupted second are kept; the last step restored.
    assert!(out.join("w1").join("summary.json").exists());
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.last().unwrap()["restore"], true, "{v}");
    assert_eq!(d.running(), vec![1]);
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

pub(crate) fn shared<'a>(v: &'a serde_json::Value, kind: &str) -> &'a serde_json::Value {
    v["shared"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} among the shared limits: {v}"))
}

/// Main burns 80 ms of CPU per request on its one thread (n8n's intake, 27 ms in the real lab,
/// made larger so two cores hold it): at most 12.5/s however many workers wait, under the
/// 20/s four workers of 2 slots and 0.4 s jobs would give. A real Prometheus scrapes main and
/// every worker each second while the scale sweep runs; the same load read back from it, its
/// windows cut by the workers up, gives the same shape and names the same limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 83 s): a scale study, one at a time, a live Prometheus"]
async fn main_s_intake_stops_scale_out_in_a_sweep_and_in_its_prometheus_history() {
    if !have_command("curl", "--version", "apt install curl")
        || !have_command("prometheus", "--version", "apt-get install prometheus")
    {
        return;
    }
    let _turn = crate::common::one_scale_study_at_a_time().await;
    // Each count loaded long enough that two 5 s windows of Prometheus' fall inside its load,
    // wherever the windows begin.
    let mut d = Deployment::start_with("scale-main", 4, 80).await;
    d.stage = "15s";
    let var = |k: &str| d.env.iter().find(|(n, _)| n == k).unwrap().1.clone();
    let workers: Vec<String> = var("HEALTH_PORTS")
        .split_whitespace()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    let main = d
        .metrics
        .trim_start_matches("http://")
        .replace("/metrics", "");
    let (_prom, port) = prometheus(
        &d.dir,
        &[("n8n", vec![main]), ("n8n-worker", workers)],
        "1s",
    )
    .await;
    // Ready is not scraping: the range starts once every target has been scraped.
    scraped_after(port, now(), 5).await;
    let t0 = now();
    let out = d.dir.join("run");
    let (code, v) = d.sweep("1,2,4", &out, None);
    assert_eq!(code, 0, "{v}");
    let t1 = now();
    let s = &v["scaling"];
    // The sweep: main's intake reached at the top count, its bound near what 4 workers got,
    // and 4 workers well under four times one. On a
    // machine whose CPU other work takes (a hog beside the suite), main cannot get its core:
    // the host is named instead (`host-shared` in the run at 4), and main's bound still caps.
    let named = s["shared"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["reached"] == true)
        .unwrap_or_else(|| panic!("no shared limit reached: {s}"))["kind"]
        .clone();
    let top = n8ncap::record::dir::load_summary(&out.join("w4")).unwrap();
    let host_taken = top
        .diagnosis
        .as_ref()
        .is_some_and(|d| d.findings.iter().any(|f| f.id == "host-shared"));
    let starved = shared(s, "main_intake")["reached"] != true;
    assert!(
        !starved || host_taken,
        "main reached nothing on a quiet host: {s}"
    );
    assert_eq!(
        named,
        if starved { "host_cpu" } else { "main_intake" },
        "{s}"
    );
    let bound = shared(s, "main_intake")["bound_per_s"].as_f64().unwrap();
    let c4 = ceiling(&v, 4);
    assert!(bound <= 1000.0 / 80.0 * 1.1, "main's bound {bound}");
    assert!(c4 <= bound * 1.1, "{c4} at 4 workers beyond main's {bound}");
    // Four workers got well under four times one worker's ceiling: main's bound (≤ 13.75/s)
    // against 4 × one worker's 2 slots ÷ 0.4 s (20/s). Held against the count of 1, not the
    // step from 2 (stop 75's quiet run, beside four other tests, measured 2 workers starved by
    // main's queue and the step from 2 to 4 at 0.68 of linear).
    let c1 = ceiling(&v, 1);
    assert!(c4 < 0.75 * 4.0 * c1, "{c4} at 4 workers against {c1} at 1");
    plan_past_main_adds_webhook_processors(&out, bound);

    // The same load from Prometheus alone.
    scraped_after(port, t1, 5).await;
    history_agrees(&d.dir, port, (t0, t1), &v, starved);
}

/// The plan for 20/s (a 30/s ceiling at 2/3) from the scale sweep in `out` refuses more workers
/// and names webhook processors: at least as many as main's `bound` divides 30/s into.
pub(crate) fn plan_past_main_adds_webhook_processors(out: &Path, bound: f64) {
    let r = run_json(&[
        "recommend",
        out.to_str().unwrap(),
        "--target-rate",
        "20",
        "--json",
    ]);
    let p = &r["plan"];
    assert!(p["workers"].is_null(), "{p}");
    let hooks = p["webhook_processors"].as_f64().unwrap();
    assert!(hooks >= (30.0 / bound).ceil() - 1.0, "{p}");
}

/// The windows of the history `scale --prometheus --out` saved in `hist`.
fn hist_windows(hist: &Path) -> Vec<serde_json::Value> {
    let h: serde_json::Value =
        serde_json::from_slice(&std::fs::read(hist.join("history.json")).unwrap()).unwrap();
    h["windows"].as_array().unwrap().clone()
}

/// `scale --prometheus` over the sweep's range: the same counts, ceilings and named limit. A
/// main starved by other work on the host saturates nothing Prometheus sees (requests wait in
/// front of main, and main never reaches its core): then the history may find fewer ceilings,
/// and must not name a limit the sweep did not.
fn history_agrees(
    dir: &Path,
    port: u16,
    (t0, t1): (f64, f64),
    v: &serde_json::Value,
    starved: bool,
) {
    let bound = shared(&v["scaling"], "main_intake")["bound_per_s"]
        .as_f64()
        .unwrap();
    let hist = dir.join("hist");
    let o = std::process::Command::new(bin())
        .args(["scale", "--prometheus", &format!("http://127.0.0.1:{port}")])
        .args(["--start", &format!("{t0:.0}"), "--end", &format!("{t1:.0}")])
        .args(["--window", "5s", "--json", "--out", hist.to_str().unwrap()])
        .output()
        .unwrap();
    if starved && o.status.code() == Some(2) {
        // Refused: fewer than two counts held through whole windows, said on stderr.
        return;
    }
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // `scale` prints the judgement itself; held as the sweep holds it.
    let h = serde_json::json!({"scaling": serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()});
    let hs = &h["scaling"];
    let counts: Vec<u64> = hs["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| !p["ceiling"].is_null())
        .map(|p| p["workers"].as_u64().unwrap())
        .collect();
    let windows: Vec<String> = hist_windows(&hist)
        .iter()
        .map(|w| {
            format!(
                "{:.0}+{:.0}: {} workers, {:.1}/s, {:.1} waiting",
                w["start"].as_f64().unwrap() - t0,
                w["end"].as_f64().unwrap() - w["start"].as_f64().unwrap(),
                w["workers"],
                w["throughput_per_s"].as_f64().unwrap(),
                w["waiting_mean"].as_f64().unwrap()
            )
        })
        .collect();
    if starved {
        assert!(
            hs["shared"]
                .as_array()
                .unwrap()
                .iter()
                .all(|l| l["reached"] == false),
            "{hs}"
        );
        return;
    }
    // 1 and 4 workers saturate what Prometheus sees (the queue at 1, main's core at 4). 2 workers
    // may fall between: when the host is shared (CI runs this beside other stacks) main's queue
    // can starve them, and their steady windows then hold no backlog (a CI run: 7.6/s with 0.8
    // waiting, 6.4/s with none). The history then names no ceiling there, rightly, and only then.
    let steady_backlog = |n: u64| {
        let held: Vec<serde_json::Value> = hist_windows(&hist)
            .into_iter()
            .filter(|w| w["workers"].as_u64() == Some(n))
            .collect();
        // The first window at a count is the step's (the split drops it when others follow).
        held.iter()
            .skip(1)
            .map(|w| w["waiting_mean"].as_f64().unwrap())
            .fold(0.0, f64::max)
    };
    let expected: Vec<u64> = [1, 2, 4]
        .into_iter()
        .filter(|&n| n != 2 || steady_backlog(2) >= 1.0 || counts.contains(&2))
        .collect();
    assert_eq!(counts, expected, "{hs}\n{windows:#?}");
    assert!(
        counts.contains(&1) && counts.contains(&4),
        "{hs}\n{windows:#?}"
    );
    // Each count's ceiling from the history holds the sweep's own count of it in its interval,
    // or is within 20 % of it (both read the same completions, over spans a second apart).
    for &n in &counts {
        let (x, hx) = (ceiling(v, n), ceiling(&h, n));
        let point = hs["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["workers"] == n)
            .unwrap();
        let (lo, hi) = (
            point["ceiling"][1].as_f64().unwrap(),
            point["ceiling"][2].as_f64().unwrap(),
        );
        assert!(
            (hx / x - 1.0).abs() <= 0.2 || (lo..=hi).contains(&x),
            "{n} workers: {hx} ({lo}–{hi}) from Prometheus, {x} by the sweep\n{windows:#?}"
        );
    }
    // Main's bound the same within 25 %, and named the same.
    let hintake = shared(hs, "main_intake");
    let hbound = hintake["bound_per_s"].as_f64().unwrap();
    assert!((hbound / bound - 1.0).abs() <= 0.25, "{hbound} and {bound}");
    assert_eq!(hintake["reached"], true, "{hs}");
    // Saved as a scale sweep's book: the plan reads it as it reads the sweep's.
    let r = run_json(&[
        "recommend",
        hist.to_str().unwrap(),
        "--target-rate",
        "20",
        "--json",
    ]);
    assert!(r["plan"]["workers"].is_null(), "{}", r["plan"]);
    assert!(r["plan"]["webhook_processors"].as_u64().unwrap() >= 1);
}

/// Postgres allows 9 connections (the simulator connects as the superuser `postgres`, so the
/// reserved ones count too). Main and each worker hold a pool of 3, opened as executions need
/// them: main's inserts at most 3, a worker one per slot (its statements hold a connection
/// 0.3 s of each 0.7 s job, so both slots often hold one at once): 1 and 2 workers fit (at most
/// 5 and 7 connections), 4 ask for up to 11. The scale sweep names Postgres' connections as what stops
/// scale-out, not the workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 61 s): a scale study, one at a time, a PostgreSQL cluster"]
async fn postgres_connections_stop_scale_out_and_the_verdict_names_them() {
    if !have_command("curl", "--version", "apt install curl") {
        return;
    }
    let _turn = crate::common::one_scale_study_at_a_time().await;
    let Some(pg) = crate::postgres::start_postgres(9).await else {
        return;
    };
    let db = crate::postgres::db_env(pg.port, 3, 300);
    let d = Deployment::start_env("scale-pg", 4, 0, &db).await;
    let out = d.dir.join("run");
    // Postgres read through a DSN beside the load: no answer of n8n's names it.
    let o = d
        .sweep_command("1,2,4", &out, None)
        .args(["--postgres-env", "PG_DSN"])
        .env(
            "PG_DSN",
            format!("host=127.0.0.1 port={} user=postgres dbname=n8n", pg.port),
        )
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    let code = o.status.code().unwrap_or(-1);
    assert!(matches!(code, 0 | 99), "{v}");
    // Postgres refused connections at 4 workers, and only there.
    let named = |n: u32| -> bool {
        let s = n8ncap::record::dir::load_summary(&out.join(format!("w{n}"))).unwrap();
        assert_eq!(
            s.stages.iter().map(|st| st.errors.db_refused).sum::<u64>(),
            0,
            "an answer named Postgres"
        );
        s.diagnosis
            .unwrap()
            .findings
            .iter()
            .any(|f| f.id.as_str() == "postgres-connections-exhausted")
    };
    assert!(!named(1));
    assert!(named(4), "Postgres not named at 4 workers");
    let s = &v["scaling"];
    let first = s["shared"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["reached"] == true)
        .unwrap_or_else(|| panic!("no shared limit reached: {s}"));
    assert_eq!(first["kind"], "postgres", "{s}");
    // The verdict names it by its kind's words, as the registry has them.
    let words = n8ncap::model::Limit::PostgresConnections.words();
    assert!(
        s["verdict"]
            .as_str()
            .unwrap()
            .contains(&format!("{words} stops it")),
        "{}",
        s["verdict"]
    );
    drop(pg);
}

/// The second lab's scale-out on one 2-core host, on the simulator at n8n 2.41.1's CPU costs (a
/// worker 50 ms, main 13 ms per execution): workers of 5 slots and 5 runner tasks, 0.4 s jobs,
/// 1 to 3 workers swept with only main's metrics given. Real n8n: 11.6, 21.6, 27.2/s, the host's
/// CPU full at 3. The sweep must place the CPU on the workers it was not given and name the
/// host with a bound near where it saturated — or, beside other work, name that work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 55 s): a scale sweep of CPU-bound simulated workers"]
async fn three_workers_on_two_cores_meet_the_host_s_cpu_placed_on_the_workers() {
    if !have_command("curl", "--version", "apt install curl") {
        return;
    }
    let cost = [("SIM_WORKER_CPU_MS", "50".to_string())];
    let mut d = Deployment::start_env("scale-host", 3, 13, &cost).await;
    d.env.push(("CONCURRENCY".into(), "5".into()));
    // Each runner's Code task at n8n 2.41.1's 5 ms (the simulator's default, 0 in this script).
    d.env.push(("RUNNER_CPU_MS".into(), "5".into()));
    // The first worker was started before CONCURRENCY was set: start the pairs again.
    assert!(d.script().arg("0").status().unwrap().success());
    assert!(d.script().arg("1").status().unwrap().success());
    let out = d.dir.join("run");
    let cmd = format!("bash {} {{workers}}", d.dir.join("scale.sh").display());
    let o = std::process::Command::new(bin())
        .args([
            "sweep",
            "--url",
            &d.webhook,
            "--vus",
            "40",
            "--warmup",
            "2s",
            "--stage-duration",
            "8s",
            "--body",
            r#"{"sleep_ms":400}"#,
            "--metrics",
            &format!("main={}", d.metrics),
            "--worker-concurrency",
            "5",
            "--runner-limit",
            "5",
            "--workers",
            "1,2,3",
            "--scale-cmd",
            &cmd,
            "--restore-workers",
            "1",
            "--scale-settle",
            "3s",
            "--queue-metrics-interval",
            "1",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ])
        .envs(d.env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    let top = n8ncap::record::dir::load_summary(&out.join("w3")).unwrap();
    let st = top.stages.last().unwrap();
    let workers = st
        .host_processes
        .iter()
        .find(|g| g.group == "n8n worker")
        .unwrap_or_else(|| panic!("{:?}", st.host_processes));
    // Three worker processes, no metrics of theirs given: placed by /proc, linked by their
    // connection to main's queue, at about 50 ms per execution.
    assert!(workers.stack && workers.processes == 3, "{workers:?}");
    let x = st.throughput_rps;
    assert!(
        within(workers.cores, 0.050 * x, 0.35),
        "{workers:?} at {x}/s"
    );
    let d3 = top.diagnosis.as_ref().unwrap();
    let host = d3
        .cpu
        .iter()
        .find(|u| u.site == n8ncap::record::diagnosis::CpuSite::Host)
        .unwrap_or_else(|| panic!("{:?}: {}", d3.cpu, d3.verdict));
    let other = d3
        .findings
        .iter()
        .find(|f| f.id == "host-shared")
        .and_then(|f| f.get("other_cores"));
    match other {
        // A quiet machine: the host is the work's, named, its bound near the ceiling at 3.
        None => {
            let at_3 = d3.measured_ceiling.as_ref().unwrap().mean;
            assert!(
                within(host.bound_per_s, at_3, 0.30),
                "{} vs {at_3}: {}",
                host.bound_per_s,
                d3.verdict
            );
            let s = &v["scaling"];
            let named = shared(s, "host_cpu");
            assert_eq!(named["reached"], true, "{s}");
            // It bends as the real stack did: the second worker adds most of one worker's
            // ceiling, the third well under one (the real lab: 11.6, 21.6, 27.2/s, the third
            // adding 48 %; here, quiet, 11.2, 19.8–20.0, 26.7–26.8/s, the third adding 62 %;
            // linear would be 100 %).
            let c = |n: u64| {
                s["points"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|p| p["workers"] == n)
                    .unwrap_or_else(|| panic!("no point at {n}: {s}"))["ceiling"][0]
                    .as_f64()
                    .unwrap_or_else(|| panic!("no ceiling at {n}: {s}"))
            };
            let (c1, c2, c3) = (c(1), c(2), c(3));
            assert!(
                c2 >= 1.5 * c1 && c3 > c2 && c3 - c2 <= 0.8 * c1,
                "{c1}, {c2}, {c3}/s at 1, 2, 3 workers"
            );
        }
        // Beside other work: it is named as other work, and the workers stay the work's.
        Some(o) => assert!(o > 0.25, "{o}"),
    }
}
