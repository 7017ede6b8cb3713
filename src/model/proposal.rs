//! A plan's proposed changes as a type of their own: each a setting line — on which n8n
//! process, under which key, in which deployment dialect (a compose file, either Helm chart, a
//! Kubernetes patch) — as the limit kinds write them when the plan is made
//! (`limits::proposal`). The renderers place the lines; they make none.

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

impl Dialect {
    /// Every dialect a plan is written in.
    pub const ALL: [Dialect; 4] = [
        Dialect::Compose,
        Dialect::HelmOfficial,
        Dialect::HelmCommunity,
        Dialect::K8s,
    ];
}

/// A plan's proposed changes: in each dialect, every kind's setting lines, and those beyond
/// what the plan's first line says (workers × concurrency, runners × their limit, or regular
/// mode's production limit).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Proposal {
    lines: Vec<(Dialect, Vec<SettingLine>)>,
    beyond_headline: Vec<(Dialect, Vec<SettingLine>)>,
}

impl Proposal {
    /// From each dialect's lines, all and beyond the headline.
    pub fn new(each: impl Fn(Dialect) -> (Vec<SettingLine>, Vec<SettingLine>)) -> Proposal {
        let mut p = Proposal::default();
        for d in Dialect::ALL {
            let (all, beyond) = each(d);
            p.lines.push((d, all));
            p.beyond_headline.push((d, beyond));
        }
        p
    }

    fn of(lines: &[(Dialect, Vec<SettingLine>)], d: Dialect) -> &[SettingLine] {
        lines
            .iter()
            .find(|(x, _)| *x == d)
            .map_or(&[], |(_, l)| l.as_slice())
    }

    /// Every setting line of the plan in `d`.
    pub fn lines(&self, d: Dialect) -> &[SettingLine] {
        Self::of(&self.lines, d)
    }

    /// The lines in `d` the plan's first line does not say.
    pub fn beyond_headline(&self, d: Dialect) -> &[SettingLine] {
        Self::of(&self.beyond_headline, d)
    }
}
