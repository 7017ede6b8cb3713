//! http(s) URLs as n8ncap takes them from users (load targets, `--metrics`, runner broker URIs),
//! checked strictly before any request — a port above 65535 is an error, not port 80 — and
//! credentials in a URL (`user:password@`) redacted wherever a URL is shown.

use crate::error::BadInput;

/// A checked `http://` or `https://` URL.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpUrl {
    pub https: bool,
    /// Without IPv6 brackets.
    pub host: String,
    pub port: u16,
    /// The port was written in the URL (the Host header then carries it).
    pub explicit_port: bool,
    /// Path and query, at least `/`.
    pub path_and_query: String,
}

impl HttpUrl {
    /// Parses `text`; `what` names the flag or field in the error ("--url", "--metrics").
    pub fn parse(text: &str, what: &str) -> Result<HttpUrl, BadInput> {
        let shown = redact_url(text);
        let bad = |why: &str| {
            BadInput(format!(
                "{what} {shown:?}: {why} (write e.g. http://127.0.0.1:5678/webhook/load)"
            ))
        };
        if text.trim().is_empty() {
            return Err(bad("empty URL"));
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("a URL cannot contain spaces or control characters"));
        }
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| bad("not a URL: it needs http:// or https://"))?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return Err(bad("only http:// and https:// are supported")),
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.contains('@') {
            return Err(bad(
                "credentials in a URL are not sent: put them in a header (Authorization)",
            ));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| bad("an IPv6 address needs its closing ]"))?;
            let port = match after {
                "" => None,
                p => Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| bad("unexpected text after the IPv6 address"))?,
                ),
            };
            (h, port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let explicit_port = port.is_some();
        let port = match port {
            None => {
                if https {
                    443
                } else {
                    80
                }
            }
            Some(p) => match p.parse::<u32>() {
                Ok(n @ 1..=65535) => n as u16,
                _ => {
                    return Err(bad(&format!(
                        "port {:?} is not a port number (1–65535)",
                        truncate(p, 20)
                    )))
                }
            },
        };
        let tail = tail.split('#').next().unwrap_or("");
        let path_and_query = if tail.is_empty() || tail.starts_with('?') {
            format!("/{tail}")
        } else {
            tail.to_string()
        };
        Ok(HttpUrl {
            https,
            host: host.to_string(),
            port,
            explicit_port,
            path_and_query,
        })
    }

    /// `host[:port]` as the Host header carries it (IPv6 in brackets).
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.explicit_port {
            format!("{host}:{}", self.port)
        } else {
            host
        }
    }

    pub fn is_loopback(&self) -> bool {
        self.host.eq_ignore_ascii_case("localhost")
            || self
                .host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }
}

/// `text` with the credentials of every `scheme://user:password@` in it replaced by `***`.
pub fn redact(text: &str) -> String {
    redact_bare(&redact_schemes(text))
}

/// An operator's command as it may be shown: every URL's password (as [`redact`]), and the
/// values of the flags and variables that carry secrets — `-a`, `--pass`, `--password`,
/// `--token`, `--requirepass` (the next word, or after `=`), and `NAME=value` where the name says
/// PASS, TOKEN, SECRET, AUTH or KEY — as `***`.
pub fn redact_command(cmd: &str) -> String {
    const FLAGS: [&str; 5] = ["-a", "--pass", "--password", "--token", "--requirepass"];
    let secret_name = |name: &str| {
        let n = name.to_ascii_uppercase();
        ["PASS", "TOKEN", "SECRET", "AUTH", "KEY"]
            .iter()
            .any(|w| n.contains(w))
    };
    let mut out = Vec::new();
    let mut hide_next = false;
    for word in redact(cmd).split(' ') {
        if std::mem::take(&mut hide_next) && !word.is_empty() {
            out.push("***".to_string());
            continue;
        }
        let bare = word.trim_start_matches(['"', '\'', '(']);
        if FLAGS.contains(&bare) {
            hide_next = true;
            out.push(word.to_string());
            continue;
        }
        match bare.split_once('=') {
            Some((name, value))
                if !value.is_empty()
                    && (FLAGS.contains(&name) || (!name.starts_with('-') && secret_name(name))) =>
            {
                let lead = &word[..word.len() - bare.len()];
                out.push(format!("{lead}{name}=***"));
            }
            _ => out.push(word.to_string()),
        }
    }
    out.join(" ")
}

/// `user:password@host` written without a scheme (as `DOCKER_HOST` or a proxy setting may
/// be): the part before the `@` of a word that holds a `:` before it.
fn redact_bare(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let lead = word.len() - word.trim_start_matches(['"', '\'', '(', '[', '<']).len();
        let (open, body) = word.split_at(lead);
        match body.rfind('@') {
            Some(at)
                if !body.contains("://")
                    && body[..at].contains(':')
                    && !body[..at].starts_with("***") =>
            {
                out.push_str(open);
                out.push_str("***");
                out.push_str(&body[at..]);
            }
            _ => out.push_str(word),
        }
    }
    out
}

/// Where the userinfo of the URL text `after` (what follows `://`) ends: its last `@` within
/// the first `limit` bytes, when the text before the first `/`, `?`, `#` or space holds an `@`,
/// or a `:` that is no port (`user:pa/ss@host`: a password may hold `/`, `?`, `#` or spaces).
/// An `@` of a path (`http://h/x@y`) is no userinfo.
fn userinfo_end(after: &str, limit: usize) -> Option<usize> {
    let end = after
        .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '"')
        .unwrap_or(after.len());
    let authority = &after[..end];
    if let Some(at) = authority.rfind('@') {
        let later = after[..limit].rfind('@').filter(|l| *l > at);
        return Some(later.unwrap_or(at));
    }
    let not_a_port = authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()));
    not_a_port.then(|| after[..limit].rfind('@')).flatten()
}

fn redact_schemes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, after) = rest.split_at(i + 3);
        out.push_str(head);
        let word_end = after
            .find(|c: char| c.is_whitespace() || c == '"')
            .unwrap_or(after.len());
        match userinfo_end(after, word_end) {
            Some(at) => {
                out.push_str("***");
                rest = &after[at..];
            }
            None => {
                let end = after
                    .find(|c: char| {
                        c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '"'
                    })
                    .unwrap_or(after.len());
                out.push_str(&after[..end]);
                rest = &after[end..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// One URL with its userinfo hidden whatever it holds (`/`, `#`, `?`, spaces, `@`): everything
/// between the scheme's `://` and the text's last `@`. For a URL given on its own (a flag's
/// value), before it is parsed.
pub fn redact_url(text: &str) -> String {
    match text.split_once("://") {
        Some((scheme, rest)) => match userinfo_end(rest, rest.len()) {
            Some(at) => format!("{scheme}://***{}", &rest[at..]),
            None => redact(text),
        },
        None => redact(text),
    }
}

pub use crate::util::truncate;

/// True when the URL's host is on this machine: n8ncap then shares the host's CPU.
pub fn is_loopback_url(url: &str) -> bool {
    // Credentials say nothing about the host (and saved URLs have them redacted).
    let bare = redact(url).replacen("://***@", "://", 1);
    HttpUrl::parse(&bare, "URL").is_ok_and(|u| u.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_s_secrets_are_hidden_and_the_rest_kept() {
        let c = "docker exec r redis-cli -u redis://:s3cr3t@127.0.0.1:6379 -a s3cr3t2 shutdown; \
                 REDISCLI_AUTH=s3cr3t3 redis-cli --pass=s3cr3t4 ping; PGPASSWORD=s3cr3t5 pg_ctl stop";
        let shown = redact_command(c);
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("127.0.0.1:6379") && shown.contains("redis-cli"));
        assert!(shown.contains("-a ***") && shown.contains("REDISCLI_AUTH=***"));
        // Words that only look like flags or assignments are kept.
        assert_eq!(
            redact_command("kubectl scale --replicas=3 deploy/w"),
            "kubectl scale --replicas=3 deploy/w"
        );
    }

    #[test]
    fn ports_out_of_range_and_garbage_are_refused() {
        for bad in [
            "http://127.0.0.1:99999/x",
            "http://127.0.0.1:0/x",
            "http://127.0.0.1:-1/x",
            "http://127.0.0.1:/x",
            "http://127.0.0.1:80a/x",
            "http://[::1/x",
            "http:///x",
            "http://",
            "",
            "  ",
            "ftp://h/x",
            "127.0.0.1:5678",
            "http://a b/x",
        ] {
            assert!(HttpUrl::parse(bad, "--url").is_err(), "{bad:?}");
        }
        let u = HttpUrl::parse("http://127.0.0.1:65535/webhook/x?a=1#f", "--url").unwrap();
        assert_eq!(
            (u.port, u.path_and_query.as_str()),
            (65535, "/webhook/x?a=1")
        );
        let u = HttpUrl::parse("HTTPS://[::1]/", "--url").unwrap();
        assert_eq!((u.https, u.port, u.host.as_str()), (true, 443, "::1"));
        assert_eq!(u.authority(), "[::1]");
        assert!(u.is_loopback());
        let u = HttpUrl::parse("http://n8n:5678?x", "--url").unwrap();
        assert_eq!(
            (u.authority().as_str(), u.path_and_query.as_str()),
            ("n8n:5678", "/?x")
        );
    }

    #[test]
    fn credentials_never_appear_in_errors_or_shown_urls() {
        let err = HttpUrl::parse("http://admin:s3cr3t@h:99999/x", "--url").unwrap_err();
        assert!(
            !err.0.contains("s3cr3t") && err.0.contains("***@h"),
            "{}",
            err.0
        );
        assert_eq!(
            redact("a http://u:p@h:1/x and redis://:pw@r:6379/0 \"ws://t@b\""),
            "a http://***@h:1/x and redis://***@r:6379/0 \"ws://***@b\""
        );
        assert_eq!(redact("http://h/x@y"), "http://h/x@y");
        // DOCKER_HOST in every form a user may write it.
        for (given, shown) in [
            ("ssh://user:pw@h", "ssh://***@h"),
            ("https://user:pw@h:2376", "https://***@h:2376"),
            (
                "unix://user:pw@/var/run/docker.sock",
                "unix://***@/var/run/docker.sock",
            ),
            ("user:pw@h:2375", "***@h:2375"),
            ("at (user:pw@h:2375): refused", "at (***@h:2375): refused"),
        ] {
            assert_eq!(redact(given), shown);
        }
        assert_eq!(redact("ops@example.com"), "ops@example.com");
        // A password holding `/`, `#`, `?` or a space (hardening round 5): hidden whole, in
        // text and in a URL given alone, before it is parsed.
        for (given, shown) in [
            ("http://u:pa/ss@h:1/x", "http://***@h:1/x"),
            ("http://u:se#cret@h:1/x", "http://***@h:1/x"),
            ("http://u:p?q@h/x", "http://***@h/x"),
            ("redis://:pa/ss@r:6379/0", "redis://***@r:6379/0"),
            ("http://h:5678/webhook/a@b", "http://h:5678/webhook/a@b"),
        ] {
            assert_eq!(redact(given), shown);
            assert_eq!(redact_url(given), shown);
        }
        assert_eq!(redact_url("http://a:b c@h:1/m"), "http://***@h:1/m");
        for url in [
            "http://u:se#cret@h:9/x",
            "http://u:p?q@h:9/x",
            "http://a:b c@h:1/m",
        ] {
            let err = HttpUrl::parse(url, "--url").unwrap_err();
            for secret in ["se#cret", "p?q", "b c"] {
                assert!(!err.0.contains(secret), "{}", err.0);
            }
        }
        assert_eq!(truncate("ééé", 2), "éé…");
        assert_eq!(truncate("ab", 2), "ab");
    }

    #[test]
    fn loopback_targets_are_recognised() {
        assert!(is_loopback_url("http://127.0.0.1:5678/webhook/x"));
        assert!(is_loopback_url("http://localhost/x"));
        assert!(is_loopback_url("https://user:pw@[::1]:443/x"));
        assert!(!is_loopback_url("http://n8n.example:5678/x"));
        assert!(!is_loopback_url("http://10.0.0.5/x"));
    }
}
