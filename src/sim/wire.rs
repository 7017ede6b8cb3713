//! The simulator's internal protocols: newline-delimited JSON over TCP.
//!
//! Two links, as in the real stack: main ↔ worker (the queue; in n8n this is Bull on Redis) and
//! worker broker ↔ runner (in n8n a websocket on port 5679 where runners send offers and the
//! broker hands out tasks). These messages are the simulator's own, not n8n's wire format.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// What a webhook call asks the workflow to do (the body the profiles send).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct JobSpec {
    /// Code-node work: holds a worker slot and a runner task — or, with `code: false`, the
    /// slot only (a workflow whose nodes wait or compute without a Code node).
    #[serde(default)]
    pub sleep_ms: u64,
    /// The workflow has a Code node (default). Without one it never takes a runner task.
    #[serde(default = "has_code")]
    pub code: bool,
    /// An external call before the Code node: holds a worker slot only.
    #[serde(default)]
    pub wait_ms: u64,
    /// MiB the Code node allocates and touches (in the runner process).
    #[serde(default)]
    pub alloc_mb: u64,
    /// Bytes of binary data the webhook received (set by main from a multipart upload, never
    /// from the body): the worker loads them while the job runs, as n8n reads binary data
    /// back from its store.
    #[serde(default)]
    pub binary_bytes: u64,
}

fn has_code() -> bool {
    true
}

impl Default for JobSpec {
    fn default() -> Self {
        JobSpec {
            sleep_ms: 0,
            code: true,
            wait_ms: 0,
            alloc_mb: 0,
            binary_bytes: 0,
        }
    }
}

/// Messages between main (the queue) and a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum QueueMsg {
    /// worker → main: who I am.
    Hello { worker: String, concurrency: u32 },
    /// worker → main: one slot is free; send one job when there is one.
    Take,
    /// main → worker: a job for a free slot.
    Job { id: u64, spec: JobSpec },
    /// worker → main: take back my free slots, I take no more jobs (Bull's local pause at a
    /// worker's shutdown).
    Pause,
    /// worker → main: a job that reached me after I paused, handed back for another worker.
    Release { id: u64, spec: JobSpec },
    /// worker → main: the job ended.
    Done {
        id: u64,
        ok: bool,
        /// Seconds from pick-up to end (n8n's execution duration, runner wait included).
        duration_s: f64,
        #[serde(default)]
        result: Option<serde_json::Value>,
        #[serde(default)]
        error: Option<String>,
        /// n8n's failed-jobs counter leaves it out: the execution ended in error while its
        /// Bull job completed (a Code task aborted at shutdown), or the stalled check failed it
        /// — measured on n8n 2.41.1, `n8n_scaling_mode_queue_jobs_failed` stayed 0 through both.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        uncounted: bool,
    },
}

/// Messages between a worker's task broker and a runner.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum BrokerMsg {
    /// runner → broker: handshake. The token is compared, never logged.
    Hello {
        runner: String,
        max_concurrency: u32,
        token: String,
    },
    /// broker → runner: handshake refused (wrong token).
    Rejected { reason: String },
    /// runner → broker: I can take one more task.
    Offer,
    /// broker → runner: run this Code task.
    Task {
        id: u64,
        sleep_ms: u64,
        alloc_mb: u64,
    },
    /// runner → broker: task finished.
    TaskDone {
        id: u64,
        ok: bool,
        slept_ms: u64,
        allocated: u64,
        #[serde(default)]
        error: Option<String>,
    },
}

/// Reads one message per line; `Ok(None)` at end of stream.
pub struct LineReader {
    inner: BufReader<OwnedReadHalf>,
    buf: String,
}

impl LineReader {
    pub async fn next<T: for<'de> Deserialize<'de>>(&mut self) -> anyhow::Result<Option<T>> {
        loop {
            self.buf.clear();
            let n = self.inner.read_line(&mut self.buf).await?;
            if n == 0 {
                return Ok(None);
            }
            let line = self.buf.trim();
            if line.is_empty() {
                continue;
            }
            return Ok(Some(serde_json::from_str(line).map_err(|e| {
                anyhow::anyhow!("malformed simulator message: {e}")
            })?));
        }
    }
}

/// Splits a stream into a line reader and a sender whose messages a background task writes in
/// order. The writer ends when every sender is dropped or the peer goes away.
pub fn split<T: Serialize + Send + 'static>(
    stream: TcpStream,
) -> (LineReader, mpsc::UnboundedSender<T>) {
    let _ = stream.set_nodelay(true);
    let (read, write) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel::<T>();
    tokio::spawn(write_loop(write, rx));
    (
        LineReader {
            inner: BufReader::new(read),
            buf: String::new(),
        },
        tx,
    )
}

async fn write_loop<T: Serialize>(mut write: OwnedWriteHalf, mut rx: mpsc::UnboundedReceiver<T>) {
    let mut out = Vec::with_capacity(256);
    while let Some(msg) = rx.recv().await {
        out.clear();
        if serde_json::to_writer(&mut out, &msg).is_err() {
            continue;
        }
        out.push(b'\n');
        // Batch whatever else is already queued into the same write.
        while let Ok(more) = rx.try_recv() {
            if serde_json::to_writer(&mut out, &more).is_ok() {
                out.push(b'\n');
            }
        }
        if write.write_all(&out).await.is_err() {
            return;
        }
    }
}
