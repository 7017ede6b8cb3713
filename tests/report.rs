//! report.html rendered by a real browser (Debian's chromium, headless): the charts are there,
//! drawn and sized, with no network needed. Skips with a printed reason without chromium.

use crate::common::*;
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
#[ignore = "stack tier (≈ 11 s): Chromium"]
async fn report_html_renders_its_charts_in_a_browser() {
    let stack = Stack::start(StackConfig {
        worker_concurrency: 15,
        runner_limit: 10,
        queue_metrics_interval: Duration::from_millis(500),
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let dir = crate::common::scratch().join(format!("n8ncap-report-{}", std::process::id()));
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
                    &format!("main=http://127.0.0.1:{port}/metrics"),
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
    // Never under the job asked for; what a busy machine adds above it is measured, and the
    // labels below must carry whatever was.
    assert!(s_time >= 0.3, "{s_time}");
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

    // Series are named by role, not by URL; the diagnosis is structured.
    assert!(
        again.contains(">RSS main<") && !again.contains(">RSS 127.0.0.1"),
        "role names"
    );
    assert!(again.contains(r#"<p class="verdict">"#) && again.contains(r#"class="finding sev-"#));
    assert!(!again.contains("<h2>Diagnosis</h2><pre>"));
    // The gauges were coarser than these 3 s stages (no --queue-metrics-interval): the slots
    // chart says why it has no slot figures.
    assert!(again.contains(r#"<p class="note">No slots-taken"#));

    let browser = chromium();
    if !require("chromium", browser.is_some(), "apt-get install chromium") {
        return;
    }
    let Some(browser) = browser else { return };
    // Measure the rendered page at a wide and a narrow window: a copy of the report with a probe
    // that writes what it sees into the DOM.
    let probe_js = r#"<script>
const out = {inner: innerWidth, scroll: document.documentElement.scrollWidth, charts: []};
const boxOf = e => e.getBoundingClientRect();
const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
for (const s of document.querySelectorAll('svg.chart')) {
  const r = boxOf(s);
  const legends = [...s.querySelectorAll('.legend')].map(boxOf);
  const labels = [...s.querySelectorAll('.ceiling-label')].map(boxOf);
  const overlaps = labels.filter(l => legends.some(g => hit(l, g))).length;
  const all = [...s.querySelectorAll('.series,.point')];
  const lastModel = all.map((e, i) => e.matches('polyline.series:not(.measured)') ? i : -1).reduce((a, b) => Math.max(a, b), -1);
  const firstPoint = all.findIndex(e => e.matches('.point'));
  out.charts.push([s.id, Math.round(r.width), Math.round(r.height), s.querySelectorAll('.point,.series,.ceiling').length, legends.length, overlaps, firstPoint < 0 || firstPoint > lastModel]);
}
document.body.setAttribute('data-probe', JSON.stringify(out));
</script></body>"#;
    let probe_path = dir.join("probe.html");
    std::fs::write(&probe_path, again.replace("</body>", probe_js)).unwrap();
    for (width, height) in [(1400, 1000), (800, 1000)] {
        let dom = Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                &format!("--window-size={width},{height}"),
                "--dump-dom",
            ])
            .arg(format!("file://{}", probe_path.display()))
            .output()
            .unwrap();
        let dom = String::from_utf8_lossy(&dom.stdout);
        let start = dom.find("data-probe=\"").expect("probe ran") + "data-probe=\"".len();
        let end = start + dom[start..].find('"').unwrap();
        let p: serde_json::Value =
            serde_json::from_str(&dom[start..end].replace("&quot;", "\"")).unwrap();
        let inner = p["inner"].as_f64().unwrap();
        assert!(
            p["scroll"].as_f64().unwrap() <= inner,
            "{width}: the page scrolls sideways: {p}"
        );
        let charts = p["charts"].as_array().unwrap();
        assert_eq!(charts.len(), 4, "{p}");
        for c in charts {
            let (w, h, drawn, legends, overlaps, on_top) = (
                c[1].as_f64().unwrap(),
                c[2].as_f64().unwrap(),
                c[3].as_u64().unwrap(),
                c[4].as_u64().unwrap(),
                c[5].as_u64().unwrap(),
                c[6].as_bool().unwrap(),
            );
            // The charts use the page's width (up to its 1200 px column), and stay in it.
            let column = inner.min(1200.0) - 40.0;
            assert!(
                w <= inner && w >= 0.85 * column,
                "{width}: chart {} is {w} px of {inner}",
                c[0]
            );
            assert!(h >= 0.3 * w, "{width}: chart {} is {w}×{h}", c[0]);
            assert!(drawn >= 2, "chart {} has {drawn} drawn marks", c[0]);
            assert!(legends >= 1, "chart {} has no legend", c[0]);
            assert_eq!(
                overlaps, 0,
                "{width}: chart {}: a ceiling label covers the legend",
                c[0]
            );
            assert!(
                on_top,
                "chart {}: measured points are drawn under a model curve",
                c[0]
            );
        }
    }
}
