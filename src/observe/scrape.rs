//! Fetching `/metrics` and reading n8n's queue gauges from it.

use super::prometheus::{self, Exposition};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use std::time::Duration;

/// GETs a URL over plain HTTP with a timeout; errors name the URL.
pub async fn http_get(url: &str, timeout: Duration) -> anyhow::Result<(u16, Bytes)> {
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| anyhow::anyhow!("{url:?} is not a URL: {e}"))?;
    if uri.scheme_str() != Some("http") {
        anyhow::bail!("{url}: only http:// metrics endpoints are supported");
    }
    let host = uri
        .host()
        .ok_or_else(|| anyhow::anyhow!("{url} has no host"))?
        .trim_matches(['[', ']'])
        .to_string();
    let port = uri.port_u16().unwrap_or(80);
    let work = async {
        let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let req = hyper::Request::get(path)
            .header(hyper::header::HOST, format!("{host}:{port}"))
            .header(hyper::header::ACCEPT, "text/plain;version=0.0.4")
            .body(Empty::<Bytes>::new())?;
        let resp = sender.send_request(req).await?;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok::<_, anyhow::Error>((status, body))
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| anyhow::anyhow!("{url} did not answer within {timeout:?}"))?
        .map_err(|e| anyhow::anyhow!("{url}: {e}"))
}

/// Scrapes and parses one endpoint.
pub async fn scrape(url: &str, timeout: Duration) -> anyhow::Result<Exposition> {
    let (status, body) = http_get(url, timeout).await?;
    if status != 200 {
        anyhow::bail!("{url} answered HTTP {status} (is N8N_METRICS=true set?)");
    }
    let text = std::str::from_utf8(&body)
        .map_err(|_| anyhow::anyhow!("{url} answered with text that is not UTF-8"))?;
    prometheus::parse(text).map_err(|e| anyhow::anyhow!("{url} is not Prometheus text: {e}"))
}

/// The queue gauges n8n main exposes (`N8N_METRICS_INCLUDE_QUEUE_METRICS=true`), prefix aware.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueGauges {
    /// `scaling_mode_queue_jobs_active`: worker slots taken (not runner tasks running).
    pub active: f64,
    /// `scaling_mode_queue_jobs_waiting`: jobs in Redis no worker has taken.
    pub waiting: f64,
    pub completed: Option<f64>,
    pub failed: Option<f64>,
}

pub fn queue_gauges(e: &Exposition, prefix: &str) -> Option<QueueGauges> {
    let g = |n: &str| e.value(&format!("{prefix}scaling_mode_queue_jobs_{n}"));
    Some(QueueGauges {
        active: g("active")?,
        waiting: g("waiting")?,
        completed: g("completed"),
        failed: g("failed"),
    })
}
