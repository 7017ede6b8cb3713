//! The HTTP client of the load engine: one HTTP/1.1 connection per virtual user, written
//! directly on a tokio socket so each request costs one write and a few reads, and the phases
//! k6 splits (blocked, connecting, sending, waiting for the first byte, receiving) are read off
//! the clock around those calls. Responses are parsed with `httparse`; bodies may be sized by
//! Content-Length, chunked, or closed-delimited. Keep-alive is used when the server allows it.
//! Only `http://` targets are supported.
//!
//! Why not hyper's client: per connection it keeps an 8 KiB write buffer and a read buffer of
//! at least 4 KiB, which put 10 000 held-open virtual users above 150 MB, and its dispatch task
//! costs a cross-task wake-up per request. The sim and the scrapers still use hyper.

use crate::error::BadInput;
use crate::wire::tls;
use bytes::{Bytes, BytesMut};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{HeaderMap, Method};
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod response;
use response::{decode_chunks, parse_head, Chunks, Framing, Sink};

/// What is kept of a response body for the checks: its first 1 MiB. The rest is read, counted
/// and dropped, so a large answer costs a virtual user no more memory than this.
pub const KEEP_BODY: usize = 1024 * 1024;
/// Largest response head (status line and headers); beyond it the answer is malformed.
const MAX_HEAD: usize = 64 * 1024;
/// Longest chunk-size line or trailer section of a chunked body.
const MAX_CHUNK_LINE: usize = 4 * 1024;
/// Read granularity; a virtual user waiting for its answer holds about this much.
const READ_CHUNK: usize = 2048;

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
    /// Request line, headers and body, serialized once.
    wire: Bytes,
    /// https: the connector and the name the certificate must carry.
    tls: Option<tls::Tls>,
}

impl Target {
    pub async fn new(
        url: &str,
        method: &str,
        headers: &std::collections::BTreeMap<String, String>,
        body: &super::body::Body,
        timeout: Duration,
    ) -> anyhow::Result<Target> {
        let parsed = crate::wire::url::HttpUrl::parse(url, "target URL")?;
        let https = parsed.https;
        let host = parsed.host.clone();
        let port = parsed.port;
        let shown = format!("{}:{port}", parsed.authority());
        let addr = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| anyhow::anyhow!("cannot resolve {shown}: {e}"))?
            .next()
            .ok_or_else(|| anyhow::anyhow!("{shown} resolves to no address"))?;
        let method: Method = method
            .to_ascii_uppercase()
            .parse()
            .map_err(|_| BadInput(format!("{method:?} is not an HTTP method")))?;
        let mut map = HeaderMap::new();
        let authority = parsed.authority();
        map.insert(
            hyper::header::HOST,
            HeaderValue::from_str(&authority).map_err(|_| {
                BadInput(format!(
                    "target URL: host {authority:?} is not a valid header value"
                ))
            })?,
        );
        for (k, v) in headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| BadInput(format!("header name {k:?} is not valid")))?;
            let value = HeaderValue::from_str(v)
                .map_err(|_| BadInput(format!("header {k} has a value that is not valid")))?;
            map.insert(name, value);
        }
        if let Some(ct) = &body.content_type {
            if !map.contains_key(hyper::header::CONTENT_TYPE) {
                map.insert(
                    hyper::header::CONTENT_TYPE,
                    HeaderValue::from_str(ct).map_err(|_| {
                        BadInput(format!("content type {ct:?} is not a valid header value"))
                    })?,
                );
            }
        }
        let body = body.bytes.clone();
        let path_and_query = parsed.path_and_query;
        let wire = Target::wire(&method, &path_and_query, &map, &body);
        Ok(Target {
            url: crate::wire::url::redact(url),
            addr,
            method,
            path_and_query,
            headers: map,
            body,
            timeout,
            wire,
            tls: if https {
                Some(tls::connector(&host, None, false)?)
            } else {
                None
            },
        })
    }

    /// The request exactly as it goes on the wire.
    fn wire(method: &Method, path: &str, headers: &HeaderMap, body: &[u8]) -> Bytes {
        let mut w = Vec::with_capacity(256 + body.len());
        w.extend_from_slice(method.as_str().as_bytes());
        w.push(b' ');
        w.extend_from_slice(path.as_bytes());
        w.extend_from_slice(b" HTTP/1.1\r\n");
        for (k, v) in headers {
            w.extend_from_slice(k.as_str().as_bytes());
            w.extend_from_slice(b": ");
            w.extend_from_slice(v.as_bytes());
            w.extend_from_slice(b"\r\n");
        }
        if !body.is_empty() || !matches!(*method, Method::GET | Method::HEAD) {
            w.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
        }
        w.extend_from_slice(b"\r\n");
        w.extend_from_slice(body);
        Bytes::from(w)
    }

    /// https: trust this PEM CA file as well, or skip verification (self-signed test hosts).
    pub fn set_tls(
        &mut self,
        ca_cert: Option<&std::path::Path>,
        insecure: bool,
    ) -> anyhow::Result<()> {
        if let Some(path) = ca_cert {
            // Checked even for an http:// target: a missing file is a typing error either way.
            crate::util::read_text_file(path, 4 << 20, "--ca-cert")?;
        }
        if let Some(t) = &self.tls {
            self.tls = Some(tls::connector(&t.host, ca_cert, insecure)?);
        }
        Ok(())
    }

    /// Replaces the body (tests send malformed bodies this way).
    pub fn with_body(&self, body: Bytes) -> Target {
        let mut t = self.clone();
        t.wire = Target::wire(&t.method, &t.path_and_query, &t.headers, &body);
        t.body = body;
        t
    }
}

/// Why a request produced no usable response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    ConnectRefused,
    ConnectOther,
    /// The TLS handshake failed (certificate, protocol).
    Tls,
    Timeout,
    /// The connection broke mid-request (reset, closed before the answer, malformed answer).
    Io,
}

/// One request's outcome and its phases.
pub struct Exchange {
    pub result: Result<(u16, Bytes), Failure>,
    pub new_connection: bool,
    pub connecting: Duration,
    pub tls_handshaking: Duration,
    pub sending: Duration,
    pub waiting: Duration,
    pub receiving: Duration,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// The body was longer than [`KEEP_BODY`]: checks saw only its first part.
    pub body_cut: bool,
    /// A redirect's `Location` (kept only for 3xx answers): what the pre-flight names.
    pub location: Option<String>,
}

impl Exchange {
    fn new() -> Exchange {
        Exchange {
            result: Err(Failure::Io),
            new_connection: false,
            connecting: Duration::ZERO,
            tls_handshaking: Duration::ZERO,
            sending: Duration::ZERO,
            waiting: Duration::ZERO,
            receiving: Duration::ZERO,
            bytes_sent: 0,
            bytes_received: 0,
            body_cut: false,
            location: None,
        }
    }
}

/// A virtual user's connection: opened on first use, reopened when the server closes it.
#[derive(Default)]
pub struct Connection {
    stream: Option<tls::Stream>,
    buf: BytesMut,
    /// Where `stream` goes: a virtual user of a mix keeps its connection while the next
    /// scenario is on the same server, and opens another when it is not.
    peer: Option<(SocketAddr, bool)>,
}

impl Connection {
    pub fn new() -> Self {
        Self::default()
    }

    async fn connect(&mut self, target: &Target) -> Result<(Duration, Duration), Failure> {
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
        let connecting = t0.elapsed();
        let t1 = Instant::now();
        let stream = match &target.tls {
            None => tls::Stream::Plain(stream),
            Some(t) => {
                match tokio::time::timeout(
                    target.timeout,
                    t.connector.connect(t.name.clone(), stream),
                )
                .await
                {
                    Err(_) => return Err(Failure::Timeout),
                    Ok(Err(_)) => return Err(Failure::Tls),
                    Ok(Ok(s)) => tls::Stream::Tls(Box::new(s)),
                }
            }
        };
        self.stream = Some(stream);
        self.peer = Some((target.addr, target.tls.is_some()));
        self.buf.clear();
        Ok((connecting, t1.elapsed()))
    }

    /// Sends one request; the caller measures blocked time and total latency around it.
    pub async fn exchange(&mut self, target: &Target) -> Exchange {
        let reused =
            self.stream.is_some() && self.peer == Some((target.addr, target.tls.is_some()));
        let ex = self.exchange_once(target).await;
        // A kept-alive connection the server closed while idle answers nothing at all: that
        // is not the server failing the request, so try once more on a new connection.
        if reused && matches!(ex.result, Err(Failure::Io)) && ex.bytes_received == 0 {
            return self.exchange_once(target).await;
        }
        ex
    }

    async fn exchange_once(&mut self, target: &Target) -> Exchange {
        let mut ex = Exchange::new();
        let peer = (target.addr, target.tls.is_some());
        if self.peer != Some(peer) {
            self.stream = None;
        }
        if self.stream.is_none() {
            ex.new_connection = true;
            match self.connect(target).await {
                Ok((c, t)) => {
                    ex.connecting = c;
                    ex.tls_handshaking = t;
                }
                Err(f) => {
                    ex.result = Err(f);
                    return ex;
                }
            }
        }
        let outcome = tokio::time::timeout(target.timeout, self.roundtrip(target, &mut ex)).await;
        ex.result = match outcome {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(f)) => Err(f),
            Err(_) => Err(Failure::Timeout),
        };
        if ex.result.is_err() {
            // The connection's state is unknown after a failure: never reuse it.
            self.stream = None;
        }
        ex
    }

    async fn roundtrip(
        &mut self,
        target: &Target,
        ex: &mut Exchange,
    ) -> Result<(u16, Bytes), Failure> {
        let Some(stream) = self.stream.as_mut() else {
            return Err(Failure::Io);
        };
        let t_send = Instant::now();
        stream
            .write_all(&target.wire)
            .await
            .map_err(|_| Failure::Io)?;
        let t_sent = Instant::now();
        ex.sending = t_sent - t_send;
        ex.bytes_sent = target.wire.len() as u64;
        self.buf.clear();
        let mut first_byte: Option<Instant> = None;
        let mut eof = false;
        // Head (skipping 1xx interim answers).
        let head = loop {
            if let Some(mut h) = parse_head(&self.buf)? {
                if target.method == Method::HEAD {
                    h.framing = Framing::None;
                }
                if (100..200).contains(&h.status) && h.status != 101 {
                    let _ = self.buf.split_to(h.len);
                    continue;
                }
                break h;
            }
            if eof {
                return Err(Failure::Io);
            }
            eof = read_more(stream, &mut self.buf, &mut first_byte, ex).await?;
        };
        let _ = self.buf.split_to(head.len);
        ex.location = head.location;
        let mut sink = Sink::default();
        match head.framing {
            Framing::None => {}
            Framing::Length(n) => {
                let mut remaining = n;
                loop {
                    let take = (self.buf.len() as u64).min(remaining) as usize;
                    sink.push(&self.buf.split_to(take));
                    remaining -= take as u64;
                    if remaining == 0 {
                        break;
                    }
                    if eof || read_more(stream, &mut self.buf, &mut first_byte, ex).await? {
                        return Err(Failure::Io);
                    }
                }
            }
            Framing::UntilClose => loop {
                sink.push(&self.buf.split());
                if eof {
                    break;
                }
                eof = read_more(stream, &mut self.buf, &mut first_byte, ex).await?;
            },
            Framing::Chunked => {
                let mut state = Chunks::Size;
                while !decode_chunks(&mut self.buf, &mut state, &mut sink)? {
                    if eof || read_more(stream, &mut self.buf, &mut first_byte, ex).await? {
                        return Err(Failure::Io);
                    }
                }
            }
        }
        ex.body_cut = sink.cut;
        let body = sink.kept.freeze();
        let done = Instant::now();
        let first = first_byte.unwrap_or(done);
        ex.waiting = first.saturating_duration_since(t_sent);
        ex.receiving = done.saturating_duration_since(first);
        if !head.keep_alive || eof || matches!(head.framing, Framing::UntilClose) {
            self.stream = None;
        }
        // Small buffers stay; a large answer's buffer is released.
        if self.buf.capacity() > 64 * 1024 {
            self.buf = BytesMut::new();
        }
        Ok((head.status, body))
    }
}

/// Reads what is available; returns true at end of stream.
async fn read_more(
    stream: &mut tls::Stream,
    buf: &mut BytesMut,
    first_byte: &mut Option<Instant>,
    ex: &mut Exchange,
) -> Result<bool, Failure> {
    if buf.capacity() - buf.len() < READ_CHUNK / 2 {
        buf.reserve(READ_CHUNK.max(buf.len().min(64 * 1024)));
    }
    let n = stream.read_buf(buf).await.map_err(|_| Failure::Io)?;
    if n > 0 && first_byte.is_none() {
        *first_byte = Some(Instant::now());
    }
    ex.bytes_received = ex.bytes_received.saturating_add(n as u64);
    Ok(n == 0)
}
