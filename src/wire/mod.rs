//! Wire-level codecs shared by the simulator and the parts that watch a real n8n: Prometheus
//! text (parse and write), RESP (a minimal Redis client), and HTTP/1 serving plus a small GET
//! client. No n8n semantics live here — no metric names, no Bull key names — so the simulator
//! and the observer each spell n8n's names on their own, each pinned by a test to real n8n, and
//! a wrong name cannot fool both.

pub mod http;
pub mod prometheus;
pub mod resp;
pub mod tls;
pub mod url;
