//! report.html rendered by a real browser (Debian's chromium, headless): the charts are there,
//! drawn and sized, with no network needed. Skips with a printed reason without chromium.

mod common;
use common::*;
use n8ncap::sim::{Stack, StackConfig};
use std::process::Command;
use std::time::Duration;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_html_renders_its_charts_in_a_browser() {
    let stack = Stack::start(StackConfig {
        worker_concurrency: 15,
        runner_limit: 10,
        queue_metrics_interval: Duration::from_millis(500),
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let dir = std::env::temp_dir().join(format!("n8ncap-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let port = stack.main_url.rsplit(':').next().unwrap().to_string();
    let out = tokio::task::spawn_blocking({
        let dir = dir.clone();
        move || {
            Command::new(bin())
                .args([
                    "sweep",
                    "--url",
                    &format!("http://127.0.0.1:{port}/webhook/load"),
                    "--vus",
                    "1,10,20",
                    "--stage-duration",
                    "3s",
                    "--warmup",
                    "1s",
                    "--body",
                    r#"{"sleep_ms":300}"#,
                    "--metrics",
                    &format!("http://127.0.0.1:{port}/metrics"),
                    "--scrape-interval",
                    "500ms",
                    "--worker-concurrency",
                    "15",
                    "--runner-limit",
                    "10",
                    "--out",
                    dir.to_str().unwrap(),
                ])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    // Self-contained: no script, no external resource.
    assert!(
        !html.contains("<script"),
        "the report must not need scripts"
    );
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    for id in ["throughput", "latency", "slots", "memory"] {
        assert!(
            html.contains(&format!("<svg id=\"{id}\"")),
            "chart {id} missing"
        );
    }
    // 10 runner tasks ÷ 0.3 s, and 15 slots ÷ S (0.3 s + the overhead measured at 1 in flight),
    // as the diagnosis recorded them.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let s_time = summary["diagnosis"]["service_time"]["value"]
        .as_f64()
        .unwrap();
    assert!((0.3..0.4).contains(&s_time), "{s_time}");
    let worker_bound = format!("worker-bound {:.2}", 15.0 / s_time);
    assert!(
        html.contains("runner-bound 33.33") && html.contains(&worker_bound),
        "ceilings labelled with their values ({worker_bound})"
    );
    // `n8ncap report DIR` rebuilds the same file.
    std::fs::remove_file(dir.join("report.html")).unwrap();
    let rebuilt = Command::new(bin())
        .args(["report", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        rebuilt.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&rebuilt.stderr)
    );
    let again = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(again.contains("<svg id=\"throughput\""));

    let browser = chromium();
    if !require("chromium", browser.is_some(), "apt-get install chromium") {
        return;
    }
    let Some(browser) = browser else { return };
    // Measure the rendered charts: a copy of the report with a probe that writes sizes into the DOM.
    let probe = again.replace(
        "</body>",
        "<script>document.body.setAttribute('data-sizes', JSON.stringify([...document.querySelectorAll('svg.chart')].map(s => { const r = s.getBoundingClientRect(); return [s.id, Math.round(r.width), Math.round(r.height), s.querySelectorAll('.point,.series,.ceiling').length]; })));</script></body>",
    );
    let probe_path = dir.join("probe.html");
    std::fs::write(&probe_path, probe).unwrap();
    let dom = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("file://{}", probe_path.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    let start = dom.find("data-sizes=\"").expect("probe ran") + "data-sizes=\"".len();
    let end = start + dom[start..].find('"').unwrap();
    let sizes: serde_json::Value =
        serde_json::from_str(&dom[start..end].replace("&quot;", "\"")).unwrap();
    let sizes = sizes.as_array().unwrap();
    assert_eq!(sizes.len(), 4, "{sizes:?}");
    for s in sizes {
        let (w, h, drawn) = (
            s[1].as_f64().unwrap(),
            s[2].as_f64().unwrap(),
            s[3].as_u64().unwrap(),
        );
        assert!(w >= 600.0 && h >= 250.0, "chart {} is {w}×{h}", s[0]);
        assert!(drawn >= 2, "chart {} has {drawn} drawn marks", s[0]);
    }
}
