//! Observe: what n8n reports about itself while load runs (Prometheus `/metrics` of main and
//! workers), parsed without loss and reduced to the figures the diagnosis needs.
//! It measures and records; it does not judge.

pub mod bull;
pub mod db_watch;
pub mod docker;
mod events;
pub mod history;
pub mod postgres;
pub mod postgres_tls;
pub mod prometheus;
mod queue_refresh;
pub mod redis_log;
pub mod refresh;
pub mod scrape;
pub mod watch;

/// The host facts a sweep records: the cores of the machine n8n runs on — the Docker
/// Engine's, or this machine's when the target is on loopback — and whether n8ncap shares them.
pub fn host_facts(url: &str, docker_cores: Option<f64>) -> crate::record::summary::Host {
    let local = crate::wire::url::is_loopback_url(url);
    let cores = match docker_cores {
        Some(n) => Some(crate::model::settings::Sourced::new(
            n,
            crate::model::settings::Provenance::Deployment(
                "the Docker Engine's host (NCPU)".into(),
            ),
        )),
        None if local => Some(crate::model::settings::Sourced::new(
            crate::util::cores(),
            crate::model::settings::Provenance::Deployment(
                "this machine (the target is on loopback)".into(),
            ),
        )),
        None => None,
    };
    crate::record::summary::Host {
        cores,
        shares_client_cpu: local,
        client_cores: Some(crate::util::cores()),
    }
}
