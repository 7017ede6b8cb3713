//! A minimal Redis client (RESP2 over TCP): URLs, one connection, commands and replies. The
//! observer reads Bull's list lengths with it (read-only: n8ncap never writes to a Redis it
//! observes) and the simulator keeps its Redis-backed queue with it; the Bull names each uses
//! live with them, not here.

use crate::error::BadInput;
use crate::wire::url::truncate;

/// How long a connection to Redis may take to be accepted.
const CONNECT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);
/// A command and its reply (the longest blocking command sent waits 1 s on the server).
pub const EXCHANGE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// `redis://[:password@]host[:port][/db]`, or `rediss://…` over TLS (managed Redis with
/// in-transit encryption; n8n's `QUEUE_BULL_REDIS_TLS=true`) with redis-py's query keys:
/// `ssl_ca_certs=PATH` (a CA beside the public roots) and `ssl_cert_reqs=none` (no check, for
/// self-signed test hosts).
#[derive(Debug, Clone, PartialEq)]
pub struct RedisUrl {
    pub host: String,
    pub port: u16,
    /// Kept only to authenticate; never printed (Debug is not used in messages).
    password: Option<String>,
    pub db: u32,
    pub tls: Option<RedisTls>,
}

/// TLS to Redis: a CA file beside the public roots, or no certificate check.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisTls {
    pub ca_cert: Option<std::path::PathBuf>,
    pub verify: bool,
}

impl RedisUrl {
    pub fn new(host: &str, port: u16, password: Option<String>, db: u32) -> RedisUrl {
        RedisUrl {
            host: host.to_string(),
            port,
            password: password.filter(|p| !p.is_empty()),
            db,
            tls: None,
        }
    }

    pub fn parse(text: &str) -> Result<RedisUrl, BadInput> {
        let bad = || {
            BadInput(format!(
                "{} is not a Redis URL: write redis://HOST:PORT[/DB] or redis://:PASSWORD@HOST:PORT",
                crate::wire::url::redact_url(text)
            ))
        };
        let (rest, tls) = match (
            text.strip_prefix("redis://"),
            text.strip_prefix("rediss://"),
        ) {
            (Some(r), _) => (r, false),
            (_, Some(r)) => (r, true),
            _ => return Err(bad()),
        };
        let (auth, hostpart) = match rest.rsplit_once('@') {
            Some((a, h)) => (Some(a), h),
            None => (None, rest),
        };
        let (hostpart, query) = hostpart.split_once('?').unwrap_or((hostpart, ""));
        let tls = tls.then(|| tls_of(query)).transpose()?;
        let (hostport, db) = match hostpart.split_once('/') {
            Some((h, d)) if !d.is_empty() => (h, d.parse().map_err(|_| bad())?),
            Some((h, _)) => (h, 0),
            None => (hostpart, 0),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (h, p.parse().map_err(|_| bad())?),
            None => (hostport, 6379),
        };
        if host.is_empty() {
            return Err(bad());
        }
        let password = auth.map(|a| a.split_once(':').map(|(_, p)| p).unwrap_or(a).to_string());
        Ok(RedisUrl {
            host: host.to_string(),
            port,
            password: password.filter(|p| !p.is_empty()),
            db,
            tls,
        })
    }

    /// The URL without its password, for messages.
    pub fn shown(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://{}:{}/{}", self.host, self.port, self.db)
    }
}

/// A `rediss://` URL's query: `ssl_ca_certs=PATH`, `ssl_cert_reqs=none|required` (redis-py's
/// names); anything else is refused, naming the key.
fn tls_of(query: &str) -> Result<RedisTls, BadInput> {
    let mut tls = RedisTls {
        ca_cert: None,
        verify: true,
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("ssl_ca_certs", v) if !v.is_empty() => tls.ca_cert = Some(v.into()),
            ("ssl_cert_reqs", "none") => tls.verify = false,
            ("ssl_cert_reqs", "required") => tls.verify = true,
            (k, _) => {
                return Err(BadInput(format!(
                    "the Redis URL's {k:?} is not a key n8ncap reads: rediss://HOST:PORT/DB?ssl_ca_certs=/path/ca.pem (a CA file) or ?ssl_cert_reqs=none (no certificate check)"
                )))
            }
        }
    }
    Ok(tls)
}

/// A RESP value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Nil,
    Int(i64),
    Str(Vec<u8>),
    Status(String),
    Array(Vec<Value>),
}

impl Value {
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Str(s) => std::str::from_utf8(s).ok()?.parse().ok(),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<String> {
        match self {
            Value::Str(s) => String::from_utf8(s.clone()).ok(),
            Value::Status(s) => Some(s.clone()),
            _ => None,
        }
    }
}

pub struct Conn {
    stream: BufReader<crate::wire::tls::Stream>,
}

impl Conn {
    pub async fn open(url: &RedisUrl) -> anyhow::Result<Conn> {
        // A connect that hangs (an address that drops SYNs) is given up after a deadline, not
        // the OS's minutes: the callers retry.
        let stream = tokio::time::timeout(
            CONNECT_DEADLINE,
            TcpStream::connect((url.host.as_str(), url.port)),
        )
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "cannot reach Redis at {}: no answer to the connection within {} s",
                url.shown(),
                CONNECT_DEADLINE.as_secs()
            )
        })?
        .map_err(|e| anyhow::anyhow!("cannot reach Redis at {}: {e}", url.shown()))?;
        let _ = stream.set_nodelay(true);
        let stream = match &url.tls {
            None => crate::wire::tls::Stream::Plain(stream),
            Some(t) => {
                let tls = crate::wire::tls::connector(&url.host, t.ca_cert.as_deref(), !t.verify)?;
                let s = tokio::time::timeout(
                    CONNECT_DEADLINE,
                    tls.connector.connect(tls.name.clone(), stream),
                )
                .await
                .map_err(|_| anyhow::anyhow!("Redis at {}: no TLS handshake within {} s", url.shown(), CONNECT_DEADLINE.as_secs()))?
                .map_err(|e| anyhow::anyhow!("Redis at {}: TLS: {e} (check ssl_ca_certs: the CA that signed Redis' certificate)", url.shown()))?;
                crate::wire::tls::Stream::Tls(Box::new(s))
            }
        };
        let mut c = Conn {
            stream: BufReader::new(stream),
        };
        if let Some(p) = &url.password {
            c.cmd(&["AUTH", p]).await.map_err(|e| {
                anyhow::anyhow!("Redis at {} refused the password: {e}", url.shown())
            })?;
        }
        if url.db != 0 {
            c.cmd(&["SELECT", &url.db.to_string()]).await?;
        }
        Ok(c)
    }

    /// One command and its reply, within [`EXCHANGE_DEADLINE`]: a server that takes the
    /// connection and never answers is an error, not a wait for ever (the callers' own limits
    /// are then checked).
    pub async fn cmd(&mut self, args: &[&str]) -> anyhow::Result<Value> {
        let exchange = async {
            self.send(args).await?;
            self.read().await
        };
        tokio::time::timeout(EXCHANGE_DEADLINE, exchange)
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "Redis took the connection but did not answer {} within {} s",
                    args.first().copied().unwrap_or("a command"),
                    EXCHANGE_DEADLINE.as_secs()
                )
            })?
    }

    pub async fn send(&mut self, args: &[&str]) -> anyhow::Result<()> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        self.stream.get_mut().write_all(&out).await?;
        Ok(())
    }

    pub async fn read(&mut self) -> anyhow::Result<Value> {
        Box::pin(self.read_inner(0)).await
    }

    /// One reply. Lengths a server announces are bounded before anything is allocated, and
    /// arrays nest at most [`MAX_DEPTH`] deep: nonsense is an error, never an abort.
    async fn read_inner(&mut self, depth: usize) -> anyhow::Result<Value> {
        let mut raw = Vec::new();
        let n = tokio::io::AsyncReadExt::take(&mut self.stream, MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut raw)
            .await?;
        if n == 0 {
            anyhow::bail!("Redis closed the connection");
        }
        if raw.last() != Some(&b'\n') {
            anyhow::bail!("not a Redis reply: a line longer than {MAX_LINE} bytes");
        }
        let text = String::from_utf8_lossy(&raw);
        let line = text.trim_end_matches(['\r', '\n']);
        let quoted = truncate(line, 80);
        let (kind, rest) = line.split_at(line.chars().next().map_or(0, char::len_utf8));
        let count = |max: i64| -> anyhow::Result<Option<usize>> {
            let n: i64 = rest
                .parse()
                .map_err(|_| anyhow::anyhow!("not a Redis reply: {quoted:?}"))?;
            if n > max || n < -1 {
                anyhow::bail!("Redis announced a length of {n}: not a reply n8ncap expects");
            }
            Ok(usize::try_from(n).ok())
        };
        match kind {
            "+" => Ok(Value::Status(quoted)),
            "-" => anyhow::bail!("Redis error: {}", truncate(rest, 200)),
            ":" => Ok(Value::Int(rest.parse().map_err(|_| {
                anyhow::anyhow!("not a Redis integer: {quoted:?}")
            })?)),
            "$" => {
                let Some(n) = count(MAX_BULK as i64)? else {
                    return Ok(Value::Nil);
                };
                let mut buf = vec![0u8; n + 2];
                tokio::io::AsyncReadExt::read_exact(&mut self.stream, &mut buf).await?;
                buf.truncate(n);
                Ok(Value::Str(buf))
            }
            "*" => {
                if depth >= MAX_DEPTH {
                    anyhow::bail!("Redis reply nested more than {MAX_DEPTH} deep");
                }
                let Some(n) = count(MAX_ARRAY as i64)? else {
                    return Ok(Value::Nil);
                };
                let mut items = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    items.push(Box::pin(self.read_inner(depth + 1)).await?);
                }
                Ok(Value::Array(items))
            }
            _ => anyhow::bail!("not a Redis reply: {quoted:?}"),
        }
    }
}

/// What answers at an address: a Redis server (PONG, or a refusal that only Redis words that
/// way), something else, or nothing yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    Redis,
    /// It answered, and not as Redis does.
    NotRedis,
    /// Nothing listens there (refused, or no route).
    Unreachable,
    /// It took the connection (or the connect) but said nothing in time: a busy machine, or a
    /// server still starting — ask again, conclude nothing.
    Silent,
}

/// Sends one RESP `PING` to `host:port` and reads the first answer line (2 s each way).
pub async fn probe(host: &str, port: u16) -> Probe {
    let t = std::time::Duration::from_secs(2);
    let mut stream = match tokio::time::timeout(t, TcpStream::connect((host, port))).await {
        Ok(Ok(s)) => s,
        Ok(Err(_)) => return Probe::Unreachable,
        Err(_) => return Probe::Silent,
    };
    if stream.write_all(b"*1\r\n$4\r\nPING\r\n").await.is_err() {
        return Probe::NotRedis;
    }
    let mut reader = tokio::io::AsyncReadExt::take(BufReader::new(stream), 256);
    let mut line = Vec::new();
    match tokio::time::timeout(t, reader.read_until(b'\n', &mut line)).await {
        Ok(Ok(_)) if line.starts_with(b"+PONG") || line.starts_with(b"-NOAUTH") => Probe::Redis,
        Err(_) => Probe::Silent,
        _ => Probe::NotRedis,
    }
}

/// True when `host` resolves to an address of this machine (or container): a listener opened
/// here accepts a connection made to it.
pub async fn is_own_host(host: &str) -> bool {
    let Ok(listener) = tokio::net::TcpListener::bind("0.0.0.0:0").await else {
        return false;
    };
    let Ok(port) = listener.local_addr().map(|a| a.port()) else {
        return false;
    };
    let Ok(addrs) = tokio::net::lookup_host((host, port)).await else {
        return false;
    };
    for a in addrs {
        let t = std::time::Duration::from_millis(300);
        if let Ok(Ok(_)) = tokio::time::timeout(t, TcpStream::connect(a)).await {
            return true;
        }
    }
    false
}

/// Bounds on what a reply may announce: a line, a bulk string, an array, nesting.
const MAX_LINE: usize = 64 * 1024;
const MAX_BULK: usize = 16 << 20;
const MAX_ARRAY: usize = 1 << 20;
const MAX_DEPTH: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_never_show_the_password() {
        let u = RedisUrl::parse("redis://:pa55@redis:6380/2").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.db), ("redis", 6380, 2));
        assert!(!u.shown().contains("pa55"));
        assert_eq!(RedisUrl::parse("redis://127.0.0.1").unwrap().port, 6379);
        let err = RedisUrl::parse("http://user:pa55@x").unwrap_err();
        assert!(
            !err.0.contains("pa55") && err.0.contains("redis://"),
            "{}",
            err.0
        );
        assert!(RedisUrl::parse("redis://:6379").is_err());
    }

    /// Serves `reply` to one connection and reads it back through a [`Conn`].
    async fn reply_of(reply: &'static [u8]) -> anyhow::Result<Value> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        tokio::spawn(async move {
            if let Ok((mut s, _)) = listener.accept().await {
                let _ = s.write_all(reply).await;
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            }
        });
        let url = RedisUrl::parse(&format!("redis://127.0.0.1:{port}"))?;
        let mut c = Conn::open(&url).await?;
        tokio::time::timeout(std::time::Duration::from_secs(1), c.read()).await?
    }

    #[tokio::test]
    async fn nonsense_replies_are_errors_before_anything_is_allocated() {
        assert_eq!(reply_of(b":42\r\n").await.unwrap(), Value::Int(42));
        assert_eq!(
            reply_of(b"*2\r\n$1\r\na\r\n$-1\r\n").await.unwrap(),
            Value::Array(vec![Value::Str(b"a".to_vec()), Value::Nil])
        );
        for bad in [
            &b"*100000000000\r\n"[..],
            b"$100000000000\r\n",
            b"$-9223372036854775808\r\n:x\r\n",
            b":notanumber\r\n",
            b"?\r\n",
            b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
        ] {
            assert!(reply_of(bad).await.is_err(), "{bad:?}");
        }
        // A line that never ends is refused at its bound, not read into memory whole.
        static LONG: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        let long = LONG.get_or_init(|| vec![b'+'; MAX_LINE + 10]);
        assert!(reply_of(long).await.is_err());
    }
}
