//! Helpers shared by the integration tests: free ports, child processes that die with the
//! test, and a one-stage closed sweep.
#![allow(dead_code)]

pub mod compose;
pub mod hostile;

use n8ncap::load::profile::{LoadModel, Profile, StageSpec};
use n8ncap::load::run::{run_sweep, SweepOptions};
use n8ncap::record::{StageResult, Summary};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Whether a test may run: `present` says whether its dependency is here. Outside CI a missing
/// dependency skips the test and says why; when `CI` is set it fails the test, so a green CI
/// never hides a test that did not run.
/// `n8ncap-<tag>-<pid>` under the temporary directory, emptied first: a run that failed under
/// an earlier process with the same id may have left results there, which a sweep's `--out`
/// refuses.
pub fn fresh_dir(tag: &str) -> std::path::PathBuf {
    let d = scratch().join(format!("n8ncap-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The directory every test's files go under: `n8ncap-tests-<pid>` in the temporary directory,
/// removed when the test process exits (whatever the tests left in it), so runs leave nothing
/// behind.
pub fn scratch() -> std::path::PathBuf {
    static ROOT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("n8ncap-tests-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("the tests' scratch directory");
        extern "C" fn remove_scratch() {
            let root = std::env::temp_dir().join(format!("n8ncap-tests-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(root);
        }
        // SAFETY: registering a plain function without arguments to run at exit.
        unsafe {
            libc::atexit(remove_scratch);
        }
        root
    })
    .clone()
}

pub fn require(dependency: &str, present: bool, install: &str) -> bool {
    if present {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{dependency} is required when CI is set: {install}");
    }
    eprintln!("skipping: {dependency} is not available ({install})");
    false
}

/// Docker: the engine's socket (or DOCKER_HOST).
pub fn have_docker() -> bool {
    require(
        "the Docker Engine",
        std::path::Path::new("/var/run/docker.sock").exists()
            || std::env::var("DOCKER_HOST").is_ok_and(|h| !h.is_empty()),
        "start dockerd",
    )
}

/// A command that runs with `arg` (e.g. `--version`).
pub fn have_command(cmd: &str, arg: &str, install: &str) -> bool {
    let ok = Command::new(cmd)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success());
    require(cmd, ok, install)
}

/// The project's root (its Cargo.toml's folder).
pub fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_n8ncap")
}

/// Runs n8ncap with `args`, expects exit 0, and reads its standard output as JSON.
pub fn run_json(args: &[&str]) -> serde_json::Value {
    let out = Command::new(bin()).args(args).output().expect("run n8ncap");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on standard output")
}

/// A port nothing listens on right now.
/// A port free now, for a server the test starts next. It is taken below the kernel's ephemeral
/// range (`ip_local_port_range`, 32768–60999 by default): a port from that range is also every
/// outgoing connection's, and the load the other tests send took one between this check and the
/// server's bind (a simulated main then never answered). Each call moves on, so the tests of one
/// process never hand out the same port twice.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    const LOW: u32 = 10_000;
    let span = ephemeral_low.saturating_sub(LOW).max(1000);
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let port = LOW + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let port = u16::try_from(port).expect("a port below 65536");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

/// A child process killed when the guard drops (also when the test fails).
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `sim main` as a process, webhook and /metrics on `http`, its queue on `queue`, queue gauges
/// every second.
pub fn spawn_sim_main(http: u16, queue: u16) -> ChildGuard {
    spawn_sim_main_with(http, queue, 0, &[])
}

/// The same, burning `cpu_ms` of CPU per request on main's one thread, with `more` variables.
pub fn spawn_sim_main_with(
    http: u16,
    queue: u16,
    cpu_ms: u32,
    more: &[(&str, String)],
) -> ChildGuard {
    let mut env = vec![
        ("N8N_PORT", http.to_string()),
        ("N8N_LISTEN_ADDRESS", "127.0.0.1".into()),
        ("QUEUE_BULL_REDIS_PORT", queue.to_string()),
        ("N8N_METRICS", "true".into()),
        ("N8N_METRICS_INCLUDE_QUEUE_METRICS", "true".into()),
        ("N8N_METRICS_QUEUE_METRICS_INTERVAL", "1".into()),
    ];
    env.extend(more.iter().cloned());
    spawn_role(&["sim", "main", "--cpu-ms", &cpu_ms.to_string()], &env)
}

/// A simulator role as a process with only `env` (and PATH). Its main's intake and its workers'
/// executions cost no CPU unless `env` gives `SIM_MAIN_CPU_MS` / `SIM_WORKER_CPU_MS` (the
/// simulator's defaults are n8n 2.41.1's 13 and 50 ms, burnt for real: a test states the cost
/// its stack has).
pub fn spawn_role(args: &[&str], env: &[(&str, String)]) -> ChildGuard {
    spawn_role_logged(args, env, Stdio::null())
}

/// The same, its standard error (where n8n's lines go) to `stderr`.
pub fn spawn_role_logged(args: &[&str], env: &[(&str, String)], stderr: Stdio) -> ChildGuard {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("SIM_MAIN_CPU_MS", "0")
        .env("SIM_WORKER_CPU_MS", "0")
        .env("SIM_RUNNER_CPU_MS", "0")
        .stdout(Stdio::null())
        .stderr(stderr);
    for (k, v) in env {
        cmd.env(k, v);
    }
    ChildGuard(cmd.spawn().expect("spawn n8ncap"))
}

/// A closed profile against `url` with the given stages (in flight) and job body.
pub fn closed_profile(
    url: &str,
    vus: &[u32],
    body: serde_json::Value,
    warmup: &str,
    dur: &str,
) -> Profile {
    let mut p = Profile::parse("model: closed\nrequest: {}\nstages: [{vus: 1}]\n", "test").unwrap();
    p.model = LoadModel::Closed;
    p.request.url = url.to_string();
    p.request.body = Some(body);
    p.request.timeout = "30s".into();
    p.warmup = warmup.into();
    p.stage_duration = dur.into();
    p.stages = vus
        .iter()
        .map(|v| StageSpec {
            vus: Some(*v),
            ..Default::default()
        })
        .collect();
    p
}

pub async fn sweep(profile: Profile, queue_metrics_url: Option<String>) -> Summary {
    sweep_scraped(profile, queue_metrics_url, Duration::from_secs(1)).await
}

/// [`sweep`] with the metrics scraped every `scrape_interval` (dense sampling turns the queue
/// gauges' snapshots into a time average).
pub async fn sweep_scraped(
    profile: Profile,
    queue_metrics_url: Option<String>,
    scrape_interval: Duration,
) -> Summary {
    let endpoints = queue_metrics_url
        .map(|url| n8ncap::observe::watch::Endpoint { url, role: None })
        .into_iter()
        .collect();
    let observer =
        n8ncap::observe::watch::observer(endpoints, None, None, scrape_interval, None).await;
    let (summary, _) = run_sweep(
        SweepOptions {
            observer,
            queue_metrics_interval: Duration::from_secs(1),
            ..SweepOptions::new(profile)
        },
        std::future::pending(),
    )
    .await
    .expect("sweep runs");
    summary
}

pub async fn one_stage(
    url: &str,
    vus: u32,
    body: serde_json::Value,
    warmup: &str,
    dur: &str,
) -> StageResult {
    let s = sweep(closed_profile(url, &[vus], body, warmup, dur), None).await;
    s.stages.into_iter().next().expect("one stage")
}

/// Waits until an HTTP endpoint answers 200: for the state, not a time (a process started on a
/// busy machine may take many seconds: five stacks starting at once beside a CPU hog took one
/// simulated main over a minute); the 4 minutes only keep a broken start from hanging.
pub async fn wait_http_ok(url: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(240);
    while std::time::Instant::now() < deadline {
        if let Ok((200, _)) = n8ncap::wire::http::http_get(url, Duration::from_secs(1)).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{url} never answered 200");
}

pub fn within(actual: f64, expected: f64, tolerance: f64) -> bool {
    (actual - expected).abs() <= expected * tolerance
}

/// Builds a `FROM scratch` image holding the test binary and the shared libraries it links,
/// with the given entrypoint (no registry here: images are made locally).
pub fn build_image(tag: &str, entrypoint: &[&str]) {
    use std::path::{Path, PathBuf};
    let ctx = scratch().join(format!(
        "n8ncap-img-{}-{}",
        std::process::id(),
        tag.replace(['/', ':'], "_")
    ));
    let _ = std::fs::remove_dir_all(&ctx);
    let root = ctx.join("rootfs");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::copy(bin(), root.join("n8ncap")).unwrap();
    let ldd = Command::new("ldd").arg(bin()).output().unwrap();
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        let path = line
            .split_whitespace()
            .find(|w| w.starts_with('/'))
            .map(PathBuf::from);
        if let Some(p) = path {
            let dest = root.join(p.strip_prefix("/").unwrap());
            std::fs::create_dir_all(dest.parent().unwrap_or(Path::new("/"))).unwrap();
            std::fs::copy(&p, &dest).unwrap();
        }
    }
    let entry = serde_json::to_string(entrypoint).unwrap();
    std::fs::write(
        ctx.join("Dockerfile"),
        format!("FROM scratch\nCOPY rootfs/ /\nENTRYPOINT {entry}\n"),
    )
    .unwrap();
    let out = Command::new("docker")
        .args(["build", "-q", "-t", tag, ctx.to_str().unwrap()])
        .output()
        .expect("docker CLI");
    assert!(
        out.status.success(),
        "docker build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&ctx);
}

/// A sweep of an in-process simulated stack with CPU watched at these role-labelled endpoints
/// every 0.5 s. The simulator runs in the test's process: its roles report their own thread's
/// CPU, and the process CPU (which contains them) is not added to the host's again.
pub async fn sweep_cpu_watched(
    profile: Profile,
    endpoints: Vec<(String, n8ncap::record::Role)>,
    settings: n8ncap::model::settings::Settings,
) -> Summary {
    let host = n8ncap::record::summary::Host {
        shares_client_cpu: false,
        ..n8ncap::observe::host_facts(&profile.request.url, None)
    };
    let endpoints = endpoints
        .into_iter()
        .map(|(url, role)| n8ncap::observe::watch::Endpoint {
            url,
            role: Some(role),
        })
        .collect();
    let observer =
        n8ncap::observe::watch::observer(endpoints, None, None, Duration::from_millis(500), None)
            .await;
    let (s, _) = run_sweep(
        SweepOptions {
            observer,
            settings: Some(settings),
            host: Some(host),
            ..SweepOptions::new(profile)
        },
        std::future::pending(),
    )
    .await
    .expect("sweep runs");
    s
}

/// A TLS acceptor with a self-signed certificate for "localhost" made here, and the PEM file
/// of that certificate (to trust it as a CA).
pub fn tls_acceptor(dir: &std::path::Path) -> (tokio_rustls::TlsAcceptor, std::path::PathBuf) {
    use tokio_rustls::rustls;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let pem = dir.join("ca.pem");
    std::fs::write(&pem, cert.cert.pem()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::try_from(cert.key_pair.serialize_der()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)
    .unwrap();
    (
        tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)),
        pem,
    )
}

/// On a busy machine (a CPU hog beside the suite) a CPU-bound simulated process cannot get its
/// core: the host's CPU taken by other work is named with its share (`host-shared`), and never
/// becomes a CPU verdict of the stack's drawn from it.
pub fn assert_host_shared(d: &n8ncap::record::Diagnosis) {
    let f = d
        .findings
        .iter()
        .find(|f| f.id == "host-shared")
        .unwrap_or_else(|| panic!("{}: {:?}", d.verdict, d.findings));
    assert!(f.get("other_cores").unwrap() >= 0.25, "{f:?}");
}

/// Tests that measure how a ceiling moves with workers or a pool, or a process's CPU per
/// execution from Prometheus, run one at a time: five tests share the suite's two cores, and
/// two 4-worker sweeps side by side starve each other's main (a CI run of 2026-12-06: a
/// Postgres pool's sweep and main's intake sweep failed together, each through the other's
/// load). The other tests, which mostly wait, still run beside them.
static SCALE_STUDY: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// Waits for the scale study's turn; held until the returned permit drops (a panic drops it).
pub async fn one_scale_study_at_a_time() -> tokio::sync::SemaphorePermit<'static> {
    SCALE_STUDY
        .acquire()
        .await
        .expect("the semaphore is never closed")
}

/// [`one_scale_study_at_a_time`] for a test without a runtime of its own (the permit is the
/// static semaphore's, so it outlives the small runtime that waited for it).
pub fn one_scale_study_at_a_time_blocking() -> tokio::sync::SemaphorePermit<'static> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime to wait in")
        .block_on(one_scale_study_at_a_time())
}

/// The stack's own service times in this run, which a busy machine stretches as it stretches
/// throughput: tests hold a rate against these instead of against the job time they asked for.
#[derive(Debug, Clone, Copy)]
pub struct Served {
    /// Tasks the runners finished, and their mean time at the runner (match to result).
    pub tasks: u64,
    pub task_s: f64,
    /// Executions main recorded in n8n's duration histogram, and their mean slot time.
    pub executions: f64,
    pub slot_s: f64,
}

/// Reads [`Served`] from the simulator: every worker's `/sim/runners` and main's
/// `n8n_workflow_execution_duration_seconds` (successes).
pub async fn served(stack: &n8ncap::sim::Stack) -> Served {
    let runners: Vec<String> = stack
        .worker_metrics_urls
        .iter()
        .map(|u| u.replace("/metrics", "/sim/runners"))
        .collect();
    served_at(&runners, &format!("{}/metrics", stack.main_url)).await
}

/// [`served`] from the workers' `/sim/runners` URLs and main's metrics URL.
pub async fn served_at(worker_runners: &[String], main_metrics: &str) -> Served {
    let (mut tasks, mut seconds) = (0u64, 0.0);
    for url in worker_runners {
        let (n, s) = n8ncap::sim::fetch_runner_tasks(url)
            .await
            .expect("the worker's /sim/runners answers");
        tasks += n;
        seconds += s;
    }
    let (_, body) = n8ncap::wire::http::http_get(main_metrics, Duration::from_secs(2))
        .await
        .expect("main's /metrics answers");
    let text = String::from_utf8_lossy(&body);
    let expo = n8ncap::wire::prometheus::parse(&text).expect("main's metrics parse");
    let of = |series: &str| {
        expo.series(series)
            .filter(|s| s.label("status") == Some("success"))
            .map(|s| s.value)
            .sum::<f64>()
    };
    let (count, sum) = (
        of("n8n_workflow_execution_duration_seconds_count"),
        of("n8n_workflow_execution_duration_seconds_sum"),
    );
    Served {
        tasks,
        task_s: if tasks > 0 {
            seconds / tasks as f64
        } else {
            f64::NAN
        },
        executions: count,
        slot_s: if count > 0.0 { sum / count } else { f64::NAN },
    }
}

/// The clean example stack (`examples/compose/minimal-clean.yml`) with its runner stopping each
/// Code task after `timeout` seconds, written in `dir` (for the time budget's tests).
pub fn stack_with_task_timeout(dir: &std::path::Path, timeout: &str) -> std::path::PathBuf {
    let clean =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/compose/minimal-clean.yml");
    let short = dir.join("short.yml");
    std::fs::write(
        &short,
        std::fs::read_to_string(clean).unwrap().replace(
            "      N8N_RUNNERS_MAX_CONCURRENCY: \"10\"",
            &format!("      N8N_RUNNERS_MAX_CONCURRENCY: \"10\"\n      N8N_RUNNERS_TASK_TIMEOUT: \"{timeout}\""),
        ),
    )
    .unwrap();
    short
}

/// `n8ncap audit --json -f FILE [--run RUN]`: its report (exit 0, or 1 for errors found).
pub fn audit_json(file: &std::path::Path, run: Option<&std::path::Path>) -> serde_json::Value {
    let mut c = Command::new(bin());
    c.args(["audit", "--json", "-f"]).arg(file);
    if let Some(r) = run {
        c.arg("--run").arg(r);
    }
    let out = c.output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The finding `id` of an audit report (the test fails naming the report when it is missing).
pub fn finding_of<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {report}"))
}

/// A real Prometheus (the Debian package) on a free port with its TSDB under `dir`, scraping
/// each job's targets every `scrape`; returned once it is ready (waited for as a state).
pub async fn prometheus(
    dir: &std::path::Path,
    jobs: &[(&str, Vec<String>)],
    scrape: &str,
) -> (ChildGuard, u16) {
    let mut config = format!(
        "global: {{scrape_interval: {scrape}, evaluation_interval: {scrape}}}\nscrape_configs:\n"
    );
    for (job, targets) in jobs {
        let list: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        config.push_str(&format!(
            "  - job_name: {job}\n    static_configs: [{{targets: [{}]}}]\n",
            list.join(", ")
        ));
    }
    let file = dir.join("prometheus.yml");
    std::fs::write(&file, config).unwrap();
    prometheus_on(&file, &dir.join("tsdb"), &[]).await
}

/// A Prometheus on a free port with `config` and its TSDB at `tsdb` (and `more` flags), ready.
pub async fn prometheus_on(
    config: &std::path::Path,
    tsdb: &std::path::Path,
    more: &[&str],
) -> (ChildGuard, u16) {
    let port = free_port();
    let guard = ChildGuard(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", tsdb.display()))
            .args(more)
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus"),
    );
    wait_http_ok(&format!("http://127.0.0.1:{port}/-/ready")).await;
    (guard, port)
}

/// Waits until Prometheus holds a scrape of each of its `targets` after `t` (Unix seconds):
/// what a load ended with is in its TSDB, and a range from `t` has every target read.
pub async fn scraped_after(port: u16, t: f64, targets: usize) {
    let url =
        format!("http://127.0.0.1:{port}/api/v1/query?query=count(timestamp(up)%20%3E%20{t:.3})");
    let deadline = std::time::Instant::now() + Duration::from_secs(240);
    while std::time::Instant::now() < deadline {
        if let Ok((200, body)) = n8ncap::wire::http::http_get(&url, Duration::from_secs(2)).await {
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let n = v["data"]["result"][0]["value"][1]
                .as_str()
                .and_then(|s| s.parse::<f64>().ok());
            if n.is_some_and(|n| n >= targets as f64) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("Prometheus on {port} never scraped its {targets} targets after {t}");
}

/// A command's standard output as JSON once it exited 0; its stderr in the panic otherwise.
pub fn json_of_success(o: &std::process::Output) -> serde_json::Value {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

/// `child`'s output once it exits, its pipes read as it runs (a full pipe never holds it back);
/// past `limit` it is killed and the test fails naming `what`.
pub fn output_within(
    child: std::process::Child,
    limit: Duration,
    what: &str,
) -> std::process::Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("the child's output"),
        Err(_) => {
            // SAFETY: kill(2) of the test's own child, by its pid.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            }
            panic!("{what}: n8ncap still ran after {limit:?}");
        }
    }
}

/// A CA and a server certificate it signed for `names`, as PEM files in `dir` (the key 0600),
/// and a second CA that signed nothing: (CA, certificate, key, other CA).
pub fn tls_files(dir: &std::path::Path, names: &[&str]) -> (String, String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "n8ncap test CA");
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
    let other_key = rcgen::KeyPair::generate().unwrap();
    let mut other = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    other.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    other
        .distinguished_name
        .push(rcgen::DnType::CommonName, "another CA");
    let other = other.self_signed(&other_key).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let file = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let paths = (
        file("ca.pem", ca.pem()),
        file("server.pem", leaf.pem()),
        file("server.key", key.serialize_pem()),
        file("other-ca.pem", other.pem()),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&paths.2, std::fs::Permissions::from_mode(0o600)).unwrap();
    paths
}
