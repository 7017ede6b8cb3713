//! A whole run as written to `summary.json` (schema [`SUMMARY_SCHEMA`]): the stages, the
//! settings and host facts read before the load (so a saved run is re-diagnosed with them), and
//! the diagnosis and recommendation once they ran.

use super::diagnosis::Diagnosis;
use super::recommendation::Recommendation;
use super::stage::{LoadModel, StageResult, ThresholdResult};
use crate::model::settings::{Settings, Sourced};
use serde::{Deserialize, Serialize};

/// `/2`: the diagnosis and recommendation are typed (saturation, CPU, kinds of break point);
/// the stages are as in `/1`, which is still read (its old diagnosis is re-computed).
pub const SUMMARY_SCHEMA: &str = "n8ncap.summary/2";

/// A diagnosis or recommendation written by another version of n8ncap is not an error: it is
/// dropped and computed again from the stages.
fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(v.and_then(|v| serde_json::from_value(v).ok()))
}

/// The host n8n ran on, as recorded with the run, so a re-diagnosis uses the same cores.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub cores: Option<Sourced<f64>>,
    /// n8ncap ran on the same host as n8n (a loopback target): its own CPU counts against the
    /// host's cores. False when the simulator runs inside n8ncap's process (its CPU is already
    /// in its roles' figures).
    pub shares_client_cpu: bool,
    /// Cores of the machine n8ncap (the load generator) ran on: its own CPU is judged against
    /// these, also when the run is diagnosed again on another machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cores: Option<f64>,
}

/// What a built body holds, as the summary records it (never the bytes themselves).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BodyInfo {
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileInfo {
    pub field: String,
    pub filename: String,
    pub bytes: u64,
}

/// One scenario of a mix as the run recorded it: never a header value or file content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioInfo {
    pub name: String,
    pub method: String,
    /// Redacted (no user:password).
    pub url: String,
    /// Share of the iterations (closed model) or of the arrival rate (open model).
    pub share: f64,
    /// A JSON body (the example workflow reads `sleep_ms`, `wait_ms`, `code`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
    /// Size of the body and the files it uploads.
    pub body_info: BodyInfo,
    /// Job and Code time the profile declares for the workflow (s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_time_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_time_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub schema: String,
    pub tool_version: String,
    pub started_at: String,
    pub finished_at: String,
    /// Ctrl-C or `--abort-on-fail` ended the run early.
    pub interrupted: bool,
    pub aborted_by_threshold: bool,
    pub profile: String,
    pub model: LoadModel,
    pub url: String,
    pub body: Option<serde_json::Value>,
    /// A profile with several scenarios: what each sent, its share and what its workflow does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scenarios: Vec<ScenarioInfo>,
    pub stages: Vec<StageResult>,
    /// Thresholds over every stage's steady window together (as k6 evaluates them).
    pub thresholds: Vec<ThresholdResult>,
    pub thresholds_passed: bool,
    /// Settings known before the load (flags, Docker), each with its source. Nothing inferred.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Settings>,
    /// The machine n8n ran on, when known (its cores bound CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Host>,
    /// The adaptive sweep's search: which level it chose next, and why (empty for a fixed sweep).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<super::stage::SearchStep>,
    /// Filled by the diagnosis step, when it ran.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub diagnosis: Option<Diagnosis>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub recommendation: Option<Recommendation>,
    /// The runner's memory limit from what its tasks used (or from the runner that was
    /// OOM-killed): present also when no capacity plan could be made.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub memory_plan: Option<super::recommendation::MemoryPlan>,
    /// The pre-flight request to each target before any load (none when skipped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preflight: Vec<Preflight>,
    /// Several k6 outputs read as this one run, and what was done to each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<MergedFile>,
    /// The run's executions left `new` or `running` in n8n's table, counted through a DSN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executions_left: Option<super::db::ExecutionsLeft>,
}

/// One of several k6 outputs read as one run: how far its clock ran ahead of the first file's
/// (from where their `vus` steps overlap), whether it was moved back by that much, and the
/// requests left out because they fell outside the span every file covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedFile {
    pub file: String,
    pub clock_ahead_s: f64,
    pub aligned: bool,
    pub requests: u64,
    pub cut_requests: u64,
}

/// What one request before the load found at a target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Preflight {
    /// The target, credentials redacted.
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub latency_ms: f64,
}

impl Summary {
    /// An empty summary for a run of `model` started at `started`; `url` is as it may be
    /// shown (credentials redacted by the caller).
    pub fn new(
        profile: &str,
        model: LoadModel,
        url: &str,
        body: Option<serde_json::Value>,
        started: std::time::SystemTime,
    ) -> Self {
        let now = crate::util::utc_rfc3339(started);
        Summary {
            schema: SUMMARY_SCHEMA.into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            started_at: now.clone(),
            finished_at: now,
            interrupted: false,
            aborted_by_threshold: false,
            profile: profile.to_string(),
            model,
            url: url.to_string(),
            body,
            scenarios: Vec::new(),
            stages: Vec::new(),
            thresholds: Vec::new(),
            thresholds_passed: true,
            settings: None,
            host: None,
            search: Vec::new(),
            diagnosis: None,
            recommendation: None,
            memory_plan: None,
            preflight: Vec::new(),
            merged_from: Vec::new(),
            executions_left: None,
        }
    }
}
