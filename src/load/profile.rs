//! Load profiles: YAML files that say what to send (request), how (stages of a closed or open
//! model), what a good answer is (checks) and when a run fails (thresholds). The six profiles
//! under `profiles/` are compiled in and picked by name; any other path is read from disk.

use super::body::FileSpec;
use crate::error::{bad_input, BadInput};
use crate::util::parse_duration;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Most scenarios one profile may mix.
pub const MAX_SCENARIOS: usize = 16;

/// Highest arrival rate a stage may ask (per second).
pub const MAX_RATE: f64 = 1e9;

/// Built-in profiles, by name.
pub const BUILTIN: [(&str, &str); 9] = [
    ("smoke", include_str!("../../profiles/smoke.yaml")),
    ("baseline", include_str!("../../profiles/baseline.yaml")),
    ("steady", include_str!("../../profiles/steady.yaml")),
    ("breakpoint", include_str!("../../profiles/breakpoint.yaml")),
    ("memory", include_str!("../../profiles/memory.yaml")),
    ("arrival", include_str!("../../profiles/arrival.yaml")),
    ("mix", include_str!("../../profiles/mix.yaml")),
    ("binary", include_str!("../../profiles/binary.yaml")),
    ("ramp", include_str!("../../profiles/ramp.yaml")),
];

pub use crate::record::LoadModel;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub model: LoadModel,
    /// The request of a one-workflow profile; with `scenarios`, what they share (URL origin,
    /// headers, timeout, TLS).
    #[serde(default)]
    pub request: RequestSpec,
    /// Several workflows at once, each with its share of the iterations (or of the arrival
    /// rate in the open model). Stages apply to the mix.
    #[serde(default)]
    pub scenarios: Vec<ScenarioSpec>,
    pub stages: Vec<StageSpec>,
    /// Default steady-state duration of a stage ("30s").
    #[serde(default = "default_stage_duration")]
    pub stage_duration: String,
    /// Default warm-up at the start of each stage, excluded from every figure.
    #[serde(default = "default_warmup")]
    pub warmup: String,
    #[serde(default = "default_checks")]
    pub checks: Vec<Check>,
    /// k6-style thresholds: metric → expressions (`rate<0.05`, `p(95)<60000`).
    #[serde(default = "default_thresholds")]
    pub thresholds: BTreeMap<String, Vec<String>>,
    /// Ramping stages (`target`): the virtual users at the start (k6's `startVUs`, default 1).
    #[serde(default = "default_start_vus")]
    pub start_vus: u32,
    /// Ramping stages: the length of each window measured while the load moves.
    #[serde(default = "default_ramp_window")]
    pub ramp_window: String,
    /// Where relative paths of the profile (body_file, files) start: its file's directory.
    #[serde(skip)]
    pub base_dir: PathBuf,
}

fn default_start_vus() -> u32 {
    1
}
fn default_ramp_window() -> String {
    "5s".into()
}

fn default_stage_duration() -> String {
    "30s".into()
}
fn default_warmup() -> String {
    "5s".into()
}

pub fn default_checks() -> Vec<Check> {
    vec![
        Check::Status { status: 200 },
        Check::Json {
            json: "ok".into(),
            equals: serde_json::Value::Bool(true),
        },
    ]
}

pub fn default_thresholds() -> BTreeMap<String, Vec<String>> {
    BTreeMap::from([
        ("http_req_failed".to_string(), vec!["rate<0.05".to_string()]),
        ("checks".to_string(), vec!["rate>0.99".to_string()]),
    ])
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestSpec {
    #[serde(default = "default_method")]
    pub method: String,
    #[serde(default = "default_url")]
    pub url: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// JSON body (the example workflow reads `sleep_ms`, `wait_ms`, `alloc_mb`).
    #[serde(default)]
    pub body: Option<serde_json::Value>,
    /// Per-request timeout (k6's default is 60 s; n8n jobs can be longer).
    #[serde(default = "default_timeout")]
    pub timeout: String,
    /// https: a PEM file of CA certificates to trust besides the public roots.
    #[serde(default)]
    pub ca_cert: Option<String>,
    /// https: accept any certificate (self-signed test hosts only).
    #[serde(default)]
    pub insecure: bool,
    /// The body is this file's bytes (relative to the profile's directory).
    #[serde(default)]
    pub body_file: Option<String>,
    /// A multipart/form-data upload of these files.
    #[serde(default)]
    pub files: Vec<FileSpec>,
    /// Form fields sent with `files`.
    #[serde(default)]
    pub fields: BTreeMap<String, String>,
}

impl Default for RequestSpec {
    fn default() -> Self {
        RequestSpec {
            method: default_method(),
            url: default_url(),
            headers: BTreeMap::new(),
            body: None,
            timeout: default_timeout(),
            ca_cert: None,
            insecure: false,
            body_file: None,
            files: Vec::new(),
            fields: BTreeMap::new(),
        }
    }
}

impl RequestSpec {
    fn has_body(&self) -> bool {
        self.body.is_some() || self.body_file.is_some() || !self.files.is_empty()
    }
}

/// One workflow of a mix: its webhook, its share, its checks and, when its body does not say
/// it (`sleep_ms`, `wait_ms`, `code`), what the workflow does.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    pub name: String,
    /// Share of the iterations (closed model) or of the arrival rate (open model), relative to
    /// the other scenarios' weights.
    #[serde(default = "default_weight")]
    pub weight: f64,
    pub request: ScenarioRequest,
    /// Default: the profile's checks.
    #[serde(default)]
    pub checks: Option<Vec<Check>>,
    /// Job time of the workflow (slot held), e.g. "1.5s".
    #[serde(default)]
    pub job_time: Option<String>,
    /// Code time of the workflow (runner task held); "0s" for a workflow without a Code node.
    #[serde(default)]
    pub code_time: Option<String>,
}

fn default_weight() -> f64 {
    1.0
}

/// A scenario's request: the URL (a path such as `/webhook/orders` is joined to the profile's
/// `request.url` origin) and what differs from the profile's request.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioRequest {
    pub url: String,
    #[serde(default)]
    pub method: Option<String>,
    /// Added to (and over) the profile's headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub body: Option<serde_json::Value>,
    #[serde(default)]
    pub body_file: Option<String>,
    #[serde(default)]
    pub files: Vec<FileSpec>,
    #[serde(default)]
    pub fields: BTreeMap<String, String>,
    #[serde(default)]
    pub timeout: Option<String>,
}

/// A scenario with the profile's defaults applied and its weight turned into a share.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    /// weight ÷ Σ weights.
    pub share: f64,
    pub request: RequestSpec,
    pub checks: Vec<Check>,
    /// Declared job and Code times (s), when the profile gives them.
    pub job_time_s: Option<f64>,
    pub code_time_s: Option<f64>,
}

fn default_method() -> String {
    "POST".into()
}
/// No target unless the user names one: a load tool never chooses where its load goes.
fn default_url() -> String {
    String::new()
}
fn default_timeout() -> String {
    "120s".into()
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageSpec {
    /// Closed model: virtual users (= requests in flight).
    #[serde(default)]
    pub vus: Option<u32>,
    /// Closed model, as k6's `ramping-vus`: move the virtual users linearly from the previous
    /// stage's target (or `start_vus`) to this one over `duration`; the same target as before
    /// holds the step.
    #[serde(default)]
    pub target: Option<u32>,
    /// Open model: arrivals per second at the start of the stage.
    #[serde(default)]
    pub rate: Option<f64>,
    /// Open model: arrivals per second at the end (linear ramp); default = `rate`.
    #[serde(default)]
    pub ramp_to: Option<f64>,
    /// Open model: cap on requests in flight; arrivals beyond it are dropped iterations.
    #[serde(default)]
    pub max_vus: Option<u32>,
    #[serde(default)]
    pub duration: Option<String>,
    #[serde(default)]
    pub warmup: Option<String>,
}

/// One check applied to every response. A request that got no response fails all checks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged, deny_unknown_fields)]
pub enum Check {
    Status {
        status: u16,
    },
    Json {
        /// Dotted path into the JSON body (`ok`, `data.0.id`).
        json: String,
        equals: serde_json::Value,
    },
    BodyContains {
        body_contains: String,
    },
}

impl Check {
    pub fn name(&self) -> String {
        match self {
            Check::Status { status } => format!("status == {status}"),
            Check::Json { json, equals } => format!("{json} == {equals}"),
            Check::BodyContains { body_contains } => format!("body contains {body_contains:?}"),
        }
    }
}

/// A stage with its durations parsed and its model checked.
#[derive(Debug, Clone, Serialize)]
pub struct Stage {
    pub vus: Option<u32>,
    pub rate: Option<f64>,
    pub ramp_to: Option<f64>,
    pub max_vus: Option<u32>,
    #[serde(with = "secs")]
    pub duration: Duration,
    #[serde(with = "secs")]
    pub warmup: Duration,
    /// A window of a ramp: the virtual users move from `from` to `to` during it.
    pub ramp: Option<crate::record::stage::Ramp>,
}

impl Stage {
    pub fn label(&self) -> String {
        if let Some(r) = self.ramp {
            return format!("ramp {}→{}", r.from, r.to);
        }
        match (self.vus, self.rate) {
            (Some(v), _) => format!("{v} in flight"),
            (None, Some(r)) => match self.ramp_to {
                Some(t) if (t - r).abs() > f64::EPSILON => format!("{r}→{t}/s"),
                _ => format!("{r}/s"),
            },
            _ => "?".into(),
        }
    }
}

pub mod secs {
    use serde::Serializer;
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

/// Flags that override profile fields.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub url: Option<String>,
    pub vus: Option<Vec<u32>>,
    pub rates: Option<Vec<f64>>,
    pub stage_duration: Option<String>,
    pub warmup: Option<String>,
    pub body: Option<String>,
    pub timeout: Option<String>,
    pub ca_cert: Option<String>,
    pub insecure: bool,
}

impl Profile {
    /// A built-in name or a path to a YAML file.
    pub fn load(name_or_path: &str) -> anyhow::Result<Profile> {
        if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Profile::parse(text, name_or_path);
        }
        let path = Path::new(name_or_path);
        if !path.exists() {
            let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
            return bad_input(format!(
                "no profile named {name_or_path:?}: use one of {} or a path to a YAML file",
                names.join(", ")
            ));
        }
        let text = crate::util::read_text_file(path, 1 << 20, "profile")?;
        let mut p = Profile::parse(&text, &path.display().to_string())?;
        p.base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(p)
    }

    pub fn parse(text: &str, origin: &str) -> anyhow::Result<Profile> {
        let mut p: Profile = serde_saphyr::from_str(text)
            .map_err(|e| BadInput(format!("profile {}", crate::util::yaml_error(origin, &e))))?;
        if p.name.is_empty() {
            p.name = origin.to_string();
        }
        Ok(p)
    }

    /// Refuses a profile that names no target: `--url`, the profile's `request.url`, or an
    /// absolute URL in every scenario. The built-in profiles name none.
    pub fn require_target(&self) -> anyhow::Result<()> {
        let relative = self
            .scenarios
            .iter()
            .any(|s| s.request.url.starts_with('/'));
        let named = if self.scenarios.is_empty() {
            !self.request.url.trim().is_empty()
        } else {
            !self.request.url.trim().is_empty() || !relative
        };
        if named {
            // A target that cannot be parsed is refused here, before anything is printed,
            // created or sent.
            for url in std::iter::once(self.request.url.as_str())
                .chain(self.scenarios.iter().map(|s| s.request.url.as_str()))
                .filter(|u| !u.trim().is_empty() && !u.starts_with('/'))
            {
                crate::wire::url::HttpUrl::parse(url, "target URL")?;
            }
            return Ok(());
        }
        bad_input(format!(
            "no target: give --url with the webhook to load (e.g. --url \
             http://127.0.0.1:5678/webhook/load{}), or a profile file whose request.url names \
             it; n8ncap never chooses a target",
            if relative {
                format!(": profile {}'s scenario paths join its origin", self.name)
            } else {
                String::new()
            }
        ))
    }

    pub fn apply(&mut self, o: &Overrides) -> anyhow::Result<()> {
        if let Some(u) = &o.url {
            self.request.url = u.clone();
        }
        if let (Some(_), false) = (&o.body, self.scenarios.is_empty()) {
            return bad_input(format!(
                "--body sets the body of a one-request profile; {} has {} scenarios: edit their \
                 bodies in the profile",
                self.name,
                self.scenarios.len()
            ));
        }
        if let Some(b) = &o.body {
            let v: serde_json::Value = serde_json::from_str(b).map_err(|e| {
                BadInput(format!(
                    "--body is not JSON ({e}): write e.g. '{{\"sleep_ms\":1000}}'"
                ))
            })?;
            self.request.body = Some(v);
            self.request.body_file = None;
            self.request.files.clear();
            self.request.fields.clear();
        }
        if let Some(t) = &o.timeout {
            self.request.timeout = t.clone();
        }
        if let Some(c) = &o.ca_cert {
            self.request.ca_cert = Some(c.clone());
        }
        if o.insecure {
            self.request.insecure = true;
        }
        if let Some(d) = &o.stage_duration {
            self.stage_duration = d.clone();
            for s in &mut self.stages {
                s.duration = None;
            }
        }
        if let Some(w) = &o.warmup {
            self.warmup = w.clone();
            for s in &mut self.stages {
                s.warmup = None;
            }
        }
        if let Some(vus) = &o.vus {
            self.model = LoadModel::Closed;
            self.stages = vus
                .iter()
                .map(|v| StageSpec {
                    vus: Some(*v),
                    ..Default::default()
                })
                .collect();
        }
        if let Some(rates) = &o.rates {
            let max_vus = self.stages.iter().filter_map(|s| s.max_vus).max();
            self.model = LoadModel::Open;
            self.stages = rates
                .iter()
                .map(|r| StageSpec {
                    rate: Some(*r),
                    max_vus,
                    ..Default::default()
                })
                .collect();
        }
        Ok(())
    }
}

mod resolve;
#[cfg(test)]
use resolve::origin;

#[cfg(test)]
mod tests;
