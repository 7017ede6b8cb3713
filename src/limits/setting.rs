//! How a kind's setting is written: on which n8n process, under which key, in which deployment
//! dialect (a compose file, either Helm chart, a Kubernetes patch).

/// The deployment dialect `recommend` writes its settings in.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// A docker-compose snippet.
    Compose,
    /// Values of n8n's Helm chart (n8n-io/n8n-hosting).
    HelmOfficial,
    /// Values of the community chart (community-charts/helm-charts).
    HelmCommunity,
    /// A strategic merge patch for the worker Deployment.
    K8s,
}

/// The n8n process a setting line goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    Main,
    Worker,
    Runner,
}

/// How a setting is written in a dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// An environment variable.
    Env(&'static str),
    /// A command-line argument (`--concurrency=`), written with its value.
    Arg(&'static str),
    /// A chart value at a dotted path.
    Value(&'static str),
    /// How many of the process run (replicas).
    Replicas,
}

/// One setting of a plan, on one process, in one dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingLine {
    pub on: Process,
    pub key: Key,
    pub value: String,
}

impl SettingLine {
    pub fn new(on: Process, key: Key, value: impl ToString) -> SettingLine {
        SettingLine {
            on,
            key,
            value: value.to_string(),
        }
    }
}
