//! A minimal Redis client (RESP2 over TCP): URLs, one connection, commands and replies. The
//! observer reads Bull's list lengths with it (read-only: n8ncap never writes to a Redis it
//! observes) and the simulator keeps its Redis-backed queue with it; the Bull names each uses
//! live with them, not here.

use crate::error::BadInput;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// `redis://[:password@]host[:port][/db]`.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisUrl {
    pub host: String,
    pub port: u16,
    /// Kept only to authenticate; never printed (Debug is not used in messages).
    password: Option<String>,
    pub db: u32,
}

impl RedisUrl {
    pub fn parse(text: &str) -> Result<RedisUrl, BadInput> {
        let bad = || {
            BadInput(format!(
                "{} is not a Redis URL: write redis://HOST:PORT[/DB] or redis://:PASSWORD@HOST:PORT",
                redact(text)
            ))
        };
        let rest = text.strip_prefix("redis://").ok_or_else(bad)?;
        let (auth, hostpart) = match rest.rsplit_once('@') {
            Some((a, h)) => (Some(a), h),
            None => (None, rest),
        };
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
        })
    }

    /// The URL without its password, for messages.
    pub fn shown(&self) -> String {
        format!("redis://{}:{}/{}", self.host, self.port, self.db)
    }
}

/// A URL with any password replaced, for error messages.
fn redact(text: &str) -> String {
    match (text.find("://"), text.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &text[..s + 3], &text[at..]),
        _ => text.to_string(),
    }
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
    stream: BufReader<TcpStream>,
}

impl Conn {
    pub async fn open(url: &RedisUrl) -> anyhow::Result<Conn> {
        let stream = TcpStream::connect((url.host.as_str(), url.port))
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach Redis at {}: {e}", url.shown()))?;
        let _ = stream.set_nodelay(true);
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

    pub async fn cmd(&mut self, args: &[&str]) -> anyhow::Result<Value> {
        self.send(args).await?;
        self.read().await
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
        Box::pin(self.read_inner()).await
    }

    async fn read_inner(&mut self) -> anyhow::Result<Value> {
        let mut line = String::new();
        if self.stream.read_line(&mut line).await? == 0 {
            anyhow::bail!("Redis closed the connection");
        }
        let line = line.trim_end_matches(['\r', '\n']);
        let (kind, rest) = line.split_at(1.min(line.len()));
        match kind {
            "+" => Ok(Value::Status(rest.to_string())),
            "-" => anyhow::bail!("Redis error: {rest}"),
            ":" => Ok(Value::Int(rest.parse()?)),
            "$" => {
                let n: i64 = rest.parse()?;
                if n < 0 {
                    return Ok(Value::Nil);
                }
                let mut buf = vec![0u8; n as usize + 2];
                tokio::io::AsyncReadExt::read_exact(&mut self.stream, &mut buf).await?;
                buf.truncate(n as usize);
                Ok(Value::Str(buf))
            }
            "*" => {
                let n: i64 = rest.parse()?;
                if n < 0 {
                    return Ok(Value::Nil);
                }
                let mut items = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    items.push(Box::pin(self.read_inner()).await?);
                }
                Ok(Value::Array(items))
            }
            _ => anyhow::bail!("not a Redis reply: {line:?}"),
        }
    }
}

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
}
