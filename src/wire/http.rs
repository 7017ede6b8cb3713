//! HTTP/1.1 on hyper: a small server (the simulator's webhook, /metrics and /healthz, and the
//! exporter) and a GET client with a timeout (scrapes, readiness waits).

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

pub type Resp = Response<Full<Bytes>>;

pub fn respond(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

pub fn json(status: StatusCode, value: &serde_json::Value) -> Resp {
    respond(status, "application/json; charset=utf-8", value.to_string())
}

/// Binds a listener, with an error that says which setting chose the address and what to do.
pub async fn bind(addr: SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            anyhow::anyhow!(
                "cannot listen on {addr} for {what}: the port is already in use; stop the other \
                 process or choose another port"
            )
        } else {
            anyhow::anyhow!("cannot listen on {addr} for {what}: {e}")
        }
    })
}

/// Serves every connection on `listener` with `handler` until the task is aborted.
pub async fn serve<F, Fut>(listener: TcpListener, handler: F)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Resp> + Send + 'static,
{
    let mut conns = JoinSet::new();
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(_) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        while conns.try_join_next().is_some() {}
        let handler = handler.clone();
        conns.spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let h = handler.clone();
                async move { Ok::<_, std::convert::Infallible>(h(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// Largest body [`http_get`] takes (a real n8n's /metrics is about 50 KB).
pub const MAX_GET_BODY: usize = 16 << 20;

/// GETs a URL over plain HTTP with a timeout; errors name the URL.
pub async fn http_get(url: &str, timeout: Duration) -> anyhow::Result<(u16, Bytes)> {
    let parsed = super::url::HttpUrl::parse(url, "URL")?;
    if parsed.https {
        anyhow::bail!(
            "{}: only http:// endpoints are supported here",
            super::url::redact(url)
        );
    }
    let (host, port) = (parsed.host.clone(), parsed.port);
    let work = async {
        let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let req = hyper::Request::get(parsed.path_and_query.as_str())
            .header(hyper::header::HOST, parsed.authority())
            .header(hyper::header::ACCEPT, "text/plain;version=0.0.4")
            .body(Empty::<Bytes>::new())?;
        let resp = sender.send_request(req).await?;
        let status = resp.status().as_u16();
        let body = http_body_util::Limited::new(resp.into_body(), MAX_GET_BODY)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    anyhow::anyhow!(
                        "the answer is larger than {} MiB: not a /metrics page",
                        MAX_GET_BODY >> 20
                    )
                } else {
                    anyhow::anyhow!("{e}")
                }
            })?
            .to_bytes();
        Ok::<_, anyhow::Error>((status, body))
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "{} did not answer within {timeout:?}",
                super::url::redact(url)
            )
        })?
        .map_err(|e| {
            anyhow::anyhow!(
                "{}: {}",
                super::url::redact(url),
                super::url::truncate(&e.to_string(), 200)
            )
        })
}
