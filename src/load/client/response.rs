//! A response read off the wire: its head parsed (status, framing, keep-alive, a redirect's
//! location), and its body kept to [`KEEP_BODY`] bytes as it comes, a chunked body decoded
//! across reads with its extensions and trailers.

use super::*;

/// How the response body is delimited.
pub(super) enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

pub(super) struct Head {
    pub(super) status: u16,
    pub(super) len: usize,
    pub(super) framing: Framing,
    pub(super) keep_alive: bool,
    /// Read only on a 3xx answer.
    pub(super) location: Option<String>,
}

/// The body as the checks see it: its first [`KEEP_BODY`] bytes.
#[derive(Default)]
pub(super) struct Sink {
    pub(super) kept: BytesMut,
    pub(super) cut: bool,
}

impl Sink {
    pub(super) fn push(&mut self, data: &[u8]) {
        let room = KEEP_BODY.saturating_sub(self.kept.len());
        if data.len() > room {
            self.cut = true;
        }
        self.kept.extend_from_slice(&data[..data.len().min(room)]);
    }
}

pub(super) fn parse_head(buf: &[u8]) -> Result<Option<Head>, Failure> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if buf.len() > MAX_HEAD {
                return Err(Failure::Io);
            }
            return Ok(None);
        }
        Err(_) => return Err(Failure::Io),
    };
    // A status outside 100–599 (`000`, `999`) is no HTTP answer: malformed, never a success.
    let status = resp
        .code
        .filter(|c| (100..=599).contains(c))
        .ok_or(Failure::Io)?;
    let http10 = resp.version == Some(0);
    let mut length = None;
    let mut chunked = false;
    let mut connection_close = http10;
    let mut location = None;
    let redirect = (300..400).contains(&status);
    for h in resp.headers.iter() {
        if redirect && h.name.eq_ignore_ascii_case("location") {
            location = Some(String::from_utf8_lossy(h.value).into_owned());
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value).map_err(|_| Failure::Io)?;
            let n = v.trim().parse::<u64>().map_err(|_| Failure::Io)?;
            if length.is_some_and(|l| l != n) {
                // Two different lengths: the answer cannot be framed (RFC 9112 §6.3).
                return Err(Failure::Io);
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = h.value.to_ascii_lowercase().ends_with(b"chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            let v = h.value.to_ascii_lowercase();
            if v.windows(5).any(|w| w == b"close") {
                connection_close = true;
            } else if v.windows(10).any(|w| w == b"keep-alive") {
                connection_close = false;
            }
        }
    }
    let framing = if (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::None
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        Framing::UntilClose
    };
    Ok(Some(Head {
        status,
        len,
        framing,
        keep_alive: !connection_close,
        location,
    }))
}

/// Where a chunked body's decoding stands between reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Chunks {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk: bytes still to come.
    Data(u64),
    /// After a chunk's data: its CRLF.
    DataEnd,
    /// After the last chunk: trailers up to an empty line.
    Trailers,
}

/// Decodes what `buf` holds of a chunked body into `sink`, consuming it; true once the last
/// chunk and the trailers are in. Sizes are checked (at most 16 hex digits), lines bounded.
pub(super) fn decode_chunks(
    buf: &mut BytesMut,
    state: &mut Chunks,
    sink: &mut Sink,
) -> Result<bool, Failure> {
    let line_end = |buf: &BytesMut| buf.windows(2).position(|w| w == b"\r\n");
    loop {
        match *state {
            Chunks::Size => {
                let Some(e) = line_end(buf) else {
                    return if buf.len() > MAX_CHUNK_LINE {
                        Err(Failure::Io)
                    } else {
                        Ok(false)
                    };
                };
                let line = std::str::from_utf8(&buf[..e]).map_err(|_| Failure::Io)?;
                let size_text = line.split(';').next().unwrap_or("").trim();
                if size_text.is_empty() || size_text.len() > 16 {
                    return Err(Failure::Io);
                }
                let size = u64::from_str_radix(size_text, 16).map_err(|_| Failure::Io)?;
                let _ = buf.split_to(e + 2);
                *state = if size == 0 {
                    Chunks::Trailers
                } else {
                    Chunks::Data(size)
                };
            }
            Chunks::Data(remaining) => {
                let take = (buf.len() as u64).min(remaining) as usize;
                sink.push(&buf.split_to(take));
                if take as u64 == remaining {
                    *state = Chunks::DataEnd;
                } else {
                    *state = Chunks::Data(remaining - take as u64);
                    return Ok(false);
                }
            }
            Chunks::DataEnd => {
                if buf.len() < 2 {
                    return Ok(false);
                }
                if &buf[..2] != b"\r\n" {
                    return Err(Failure::Io);
                }
                let _ = buf.split_to(2);
                *state = Chunks::Size;
            }
            Chunks::Trailers => {
                let Some(e) = line_end(buf) else {
                    return if buf.len() > MAX_CHUNK_LINE {
                        Err(Failure::Io)
                    } else {
                        Ok(false)
                    };
                };
                let _ = buf.split_to(e + 2);
                if e == 0 {
                    return Ok(true);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn decode_all(parts: &[&[u8]]) -> Result<(bool, Vec<u8>, bool), Failure> {
        let mut buf = BytesMut::new();
        let mut state = Chunks::Size;
        let mut sink = Sink::default();
        let mut done = false;
        for p in parts {
            buf.extend_from_slice(p);
            done = decode_chunks(&mut buf, &mut state, &mut sink)?;
        }
        Ok((done, sink.kept.to_vec(), sink.cut))
    }

    proptest::proptest! {
        // The HTTP answer parser on random bytes: a head, a framing or an error — never a
        // panic. (`PROPTEST_CASES=20000 cargo test --release --lib client` runs it longer.)
        #[test]
        fn random_answers_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600)) {
            let _ = parse_head(&bytes);
            let mut buf = BytesMut::from(&bytes[..]);
            let _ = decode_chunks(&mut buf, &mut Chunks::Size, &mut Sink::default());
        }

        // Any body, chunked in any sizes and delivered in any pieces, decodes to itself.
        #[test]
        fn chunked_bodies_survive_any_split(
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2000),
            sizes in proptest::collection::vec(1usize..300, 1..20),
            cuts in proptest::collection::vec(1usize..64, 1..50),
        ) {
            let mut wire = Vec::new();
            let (mut at, mut k) = (0, 0);
            while at < body.len() {
                let n = sizes[k % sizes.len()].min(body.len() - at);
                wire.extend_from_slice(format!("{n:x}\r\n").as_bytes());
                wire.extend_from_slice(&body[at..at + n]);
                wire.extend_from_slice(b"\r\n");
                at += n;
                k += 1;
            }
            wire.extend_from_slice(b"0\r\n\r\n");
            let mut parts = Vec::new();
            let (mut at, mut k) = (0, 0);
            while at < wire.len() {
                let n = cuts[k % cuts.len()].min(wire.len() - at);
                parts.push(&wire[at..at + n]);
                at += n;
                k += 1;
            }
            let (done, kept, cut) = decode_all(&parts).unwrap();
            proptest::prop_assert!(done && !cut);
            proptest::prop_assert_eq!(kept, body);
        }
    }

    #[test]
    pub(super) fn chunked_bodies_decode_with_extensions_and_trailers() {
        let wire: &[u8] = b"4;ext=1\r\nWiki\r\n6\r\npedia \r\n0\r\nX-T: 1\r\n\r\n";
        assert_eq!(
            decode_all(&[wire]).unwrap(),
            (true, b"Wikipedia ".to_vec(), false)
        );
        // Split anywhere, byte by byte: the same body.
        let bytes: Vec<&[u8]> = wire.chunks(1).collect();
        assert_eq!(
            decode_all(&bytes).unwrap(),
            (true, b"Wikipedia ".to_vec(), false)
        );
        assert!(!decode_all(&[&wire[..12]]).unwrap().0);
        for bad in [
            &b"zz\r\n"[..],
            b"\r\n",
            b"ffffffffffffffffff\r\n",
            b"-1\r\n",
            b"4\r\nWikiXX",
        ] {
            assert!(decode_all(&[bad]).is_err(), "{bad:?}");
        }
        // A chunk announcing 2^64−1 bytes is read (and cut), not allocated.
        let (done, kept, cut) =
            decode_all(&[b"ffffffffffffffff\r\n", &vec![b'a'; KEEP_BODY + 10]]).unwrap();
        assert!(!done && cut && kept.len() == KEEP_BODY);
        // An endless size line is refused.
        assert!(decode_all(&[&vec![b'1'; MAX_CHUNK_LINE + 1]]).is_err());
    }

    #[test]
    pub(super) fn heads_choose_framing_and_keep_alive() {
        // No HTTP status: malformed (an io error), never counted as a success.
        for head in [&b"HTTP/1.1 000 OK\r\n\r\n"[..], b"HTTP/1.1 999 X\r\n\r\n"] {
            assert!(matches!(parse_head(head), Err(Failure::Io)));
        }
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc")
            .unwrap()
            .unwrap();
        assert!(matches!(h.framing, Framing::Length(3)) && h.keep_alive && h.status == 200);
        let h = parse_head(b"HTTP/1.0 200 OK\r\n\r\nabc").unwrap().unwrap();
        assert!(matches!(h.framing, Framing::UntilClose) && !h.keep_alive);
        let h = parse_head(
            b"HTTP/1.1 500 X\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert!(matches!(h.framing, Framing::Chunked) && !h.keep_alive && h.status == 500);
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-")
            .unwrap()
            .is_none());
        assert!(parse_head(b"<html>garbage</html>\r\n\r\n").is_err());
    }
}
