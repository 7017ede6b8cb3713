//! The HTTP client of the load engine: one HTTP/1.1 connection per virtual user (hyper's
//! `client::conn::http1`), with the socket wrapped so each request's phases can be split the
//! way k6 splits them: blocked, connecting, sending, waiting (time to first byte), receiving.
//! Only `http://` targets are supported.

use crate::error::BadInput;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{HeaderMap, Method};
use hyper_util::rt::TokioIo;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// What every request of a run sends, prepared once.
#[derive(Debug, Clone)]
pub struct Target {
    pub url: String,
    pub addr: SocketAddr,
    pub method: Method,
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub timeout: Duration,
}

impl Target {
    pub async fn new(
        url: &str,
        method: &str,
        headers: &std::collections::BTreeMap<String, String>,
        body: Option<&serde_json::Value>,
        timeout: Duration,
    ) -> anyhow::Result<Target> {
        let uri: hyper::Uri = url.parse().map_err(|e| {
            BadInput(format!(
                "{url:?} is not a URL ({e}): write e.g. http://127.0.0.1:5678/webhook/load"
            ))
        })?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(BadInput(format!(
                    "{url}: https targets are not supported yet; point n8ncap at the plain-HTTP \
                     port (inside the network, e.g. http://n8n:5678)"
                ))
                .into())
            }
            _ => {
                return Err(BadInput(format!("{url:?} needs an http:// scheme")).into());
            }
        }
        let host = uri
            .host()
            .ok_or_else(|| BadInput(format!("{url:?} has no host")))?
            .trim_matches(['[', ']'])
            .to_string();
        let port = uri.port_u16().unwrap_or(80);
        let addr = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| anyhow::anyhow!("cannot resolve {host} (from {url}): {e}"))?
            .next()
            .ok_or_else(|| anyhow::anyhow!("{host} (from {url}) resolves to no address"))?;
        let method: Method = method
            .to_ascii_uppercase()
            .parse()
            .map_err(|_| BadInput(format!("{method:?} is not an HTTP method")))?;
        let mut map = HeaderMap::new();
        let authority = match uri.port_u16() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        map.insert(
            hyper::header::HOST,
            HeaderValue::from_str(&authority)
                .map_err(|_| BadInput(format!("{url:?}: host is not a valid header value")))?,
        );
        for (k, v) in headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| BadInput(format!("header name {k:?} is not valid")))?;
            let value = HeaderValue::from_str(v)
                .map_err(|_| BadInput(format!("header {k} has a value that is not valid")))?;
            map.insert(name, value);
        }
        let body = match body {
            Some(v) => {
                if !map.contains_key(hyper::header::CONTENT_TYPE) {
                    map.insert(
                        hyper::header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                }
                Bytes::from(serde_json::to_vec(v)?)
            }
            None => Bytes::new(),
        };
        Ok(Target {
            url: url.to_string(),
            addr,
            method,
            path_and_query: uri
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| "/".into()),
            headers: map,
            body,
            timeout,
        })
    }

    fn request(&self) -> hyper::Request<Full<Bytes>> {
        let mut req = hyper::Request::new(Full::new(self.body.clone()));
        *req.method_mut() = self.method.clone();
        if let Ok(uri) = self.path_and_query.parse() {
            *req.uri_mut() = uri;
        }
        *req.headers_mut() = self.headers.clone();
        req
    }
}

/// Timestamps the socket wrapper records, in ns since `base` (0 = not yet).
struct Marks {
    base: Instant,
    first_write: AtomicU64,
    last_write: AtomicU64,
    first_read: AtomicU64,
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
}

impl Marks {
    fn now(&self) -> u64 {
        (self.base.elapsed().as_nanos() as u64).max(1)
    }
    fn reset(&self) {
        self.first_write.store(0, Ordering::Relaxed);
        self.last_write.store(0, Ordering::Relaxed);
        self.first_read.store(0, Ordering::Relaxed);
        self.bytes_written.store(0, Ordering::Relaxed);
        self.bytes_read.store(0, Ordering::Relaxed);
    }
    fn at(&self, v: &AtomicU64) -> Option<Instant> {
        match v.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(self.base + Duration::from_nanos(ns)),
        }
    }
}

struct TimedStream {
    inner: TcpStream,
    marks: Arc<Marks>,
}

impl AsyncRead for TimedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            let m = &self.marks;
            if m.first_read.load(Ordering::Relaxed) == 0 {
                m.first_read.store(m.now(), Ordering::Relaxed);
            }
            m.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }
}

impl AsyncWrite for TimedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            let m = &self.marks;
            let now = m.now();
            if m.first_write.load(Ordering::Relaxed) == 0 {
                m.first_write.store(now, Ordering::Relaxed);
            }
            m.last_write.store(now, Ordering::Relaxed);
            m.bytes_written.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            let m = &self.marks;
            let now = m.now();
            if m.first_write.load(Ordering::Relaxed) == 0 {
                m.first_write.store(now, Ordering::Relaxed);
            }
            m.last_write.store(now, Ordering::Relaxed);
            m.bytes_written.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Why a request produced no usable response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    ConnectRefused,
    ConnectOther,
    Timeout,
    /// The connection broke mid-request (reset, closed before the answer).
    Io,
}

/// One request's outcome and its phases.
pub struct Exchange {
    pub result: Result<(u16, Bytes), Failure>,
    pub new_connection: bool,
    pub connecting: Duration,
    pub sending: Duration,
    pub waiting: Duration,
    pub receiving: Duration,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// A virtual user's connection: opened on first use, reopened when the server closes it.
pub struct Connection {
    sender: Option<SendRequest<Full<Bytes>>>,
    marks: Option<Arc<Marks>>,
}

impl Default for Connection {
    fn default() -> Self {
        Self::new()
    }
}

impl Connection {
    pub fn new() -> Self {
        Connection {
            sender: None,
            marks: None,
        }
    }

    async fn connect(&mut self, target: &Target) -> Result<Duration, Failure> {
        let t0 = Instant::now();
        let stream =
            match tokio::time::timeout(target.timeout, TcpStream::connect(target.addr)).await {
                Err(_) => return Err(Failure::Timeout),
                Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    return Err(Failure::ConnectRefused)
                }
                Ok(Err(_)) => return Err(Failure::ConnectOther),
                Ok(Ok(s)) => s,
            };
        let _ = stream.set_nodelay(true);
        let marks = Arc::new(Marks {
            base: Instant::now(),
            first_write: AtomicU64::new(0),
            last_write: AtomicU64::new(0),
            first_read: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
        });
        let io = TokioIo::new(TimedStream {
            inner: stream,
            marks: marks.clone(),
        });
        let (sender, conn) = hyper::client::conn::http1::Builder::new()
            .handshake(io)
            .await
            .map_err(|_| Failure::ConnectOther)?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        self.sender = Some(sender);
        self.marks = Some(marks);
        Ok(t0.elapsed())
    }

    /// Sends one request; the caller measures blocked time and total latency around it.
    pub async fn exchange(&mut self, target: &Target) -> Exchange {
        let ex = self.exchange_once(target).await;
        // A kept-alive connection the server closed while idle fails before a byte is sent:
        // that is not the server failing the request, so try once more on a new connection.
        if matches!(ex.result, Err(Failure::Io)) && !ex.new_connection && ex.bytes_sent == 0 {
            return self.exchange_once(target).await;
        }
        ex
    }

    async fn exchange_once(&mut self, target: &Target) -> Exchange {
        let mut ex = Exchange {
            result: Err(Failure::Io),
            new_connection: false,
            connecting: Duration::ZERO,
            sending: Duration::ZERO,
            waiting: Duration::ZERO,
            receiving: Duration::ZERO,
            bytes_sent: 0,
            bytes_received: 0,
        };
        let usable = match &mut self.sender {
            Some(s) => s.ready().await.is_ok(),
            None => false,
        };
        if !usable {
            self.sender = None;
            ex.new_connection = true;
            match self.connect(target).await {
                Ok(d) => ex.connecting = d,
                Err(f) => {
                    ex.result = Err(f);
                    return ex;
                }
            }
        }
        let (Some(sender), Some(marks)) = (self.sender.as_mut(), self.marks.clone()) else {
            return ex;
        };
        marks.reset();
        let start = Instant::now();
        let work = async {
            let resp = sender
                .send_request(target.request())
                .await
                .map_err(|_| Failure::Io)?;
            let status = resp.status().as_u16();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|_| Failure::Io)?
                .to_bytes();
            Ok::<_, Failure>((status, body))
        };
        let outcome = tokio::time::timeout(target.timeout, work).await;
        let end = Instant::now();
        ex.result = match outcome {
            Ok(r) => r,
            Err(_) => Err(Failure::Timeout),
        };
        if ex.result.is_err() {
            // The connection's state is unknown after a failure: never reuse it.
            self.sender = None;
        }
        let first_write = marks.at(&marks.first_write).unwrap_or(start).max(start);
        let last_write = marks
            .at(&marks.last_write)
            .unwrap_or(first_write)
            .max(first_write);
        let first_read = marks
            .at(&marks.first_read)
            .unwrap_or(end)
            .clamp(last_write, end);
        ex.sending = last_write - first_write;
        ex.waiting = first_read - last_write;
        ex.receiving = end - first_read;
        ex.bytes_sent = marks.bytes_written.load(Ordering::Relaxed);
        ex.bytes_received = marks.bytes_read.load(Ordering::Relaxed);
        ex
    }
}
