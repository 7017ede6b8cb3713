//! The pre-flight request: one request to each scenario's target before any load, so a wrong
//! path, a wrong port or a missing credential stops the run after one request with the status
//! and the URL — not after minutes of 404s or refused connections measured as load. What it
//! found is saved with the run. `--no-preflight` skips it.

use super::super::client::{Connection, Failure};
use super::super::profile::Profile;
use crate::error::BadInput;
use crate::record::summary::Preflight;

/// Statuses that say the target is not the webhook the profile means (or not open to it).
const REFUSED: [u16; 6] = [400, 401, 403, 404, 405, 410];

/// Builds every scenario's body and target without sending anything: a missing body file or a
/// bad URL is refused before the results directory is made.
pub async fn check_targets(profile: &Profile) -> anyhow::Result<()> {
    super::prepare_scenarios(profile).await.map(|_| ())
}

/// Sends one request per scenario; Err (bad input, exit 2) when a target refuses the
/// connection or answers a status that says it is the wrong target.
pub async fn preflight(profile: &Profile) -> anyhow::Result<Vec<Preflight>> {
    let (runs, _) = super::prepare_scenarios(profile).await?;
    let mut out = Vec::new();
    for run in &runs {
        let t = &run.target;
        let shown = crate::wire::url::redact(&t.url);
        let mut conn = Connection::new();
        let t0 = std::time::Instant::now();
        let ex = conn.exchange(t).await;
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        let (status, error) = match ex.result {
            Ok((status, _)) => (Some(status), None),
            Err(f) => (None, Some(failure_words(f))),
        };
        let refused = match (status, &ex.result) {
            // A redirect is not the webhook: n8ncap does not follow it, so every request of
            // the load would measure the redirect.
            (Some(s), _) => REFUSED.contains(&s) || (300..400).contains(&s),
            (None, Err(Failure::ConnectRefused | Failure::ConnectOther | Failure::Tls)) => true,
            _ => false,
        };
        if refused {
            let what = match (status, &error) {
                (Some(s), _) if (300..400).contains(&s) => format!(
                    "answered HTTP {s}, a redirect to {}: n8ncap does not follow redirects, so the load would measure the redirect — point --url (or the profile's url) at where it leads",
                    ex.location.as_deref().map_or_else(
                        || "no Location given".to_string(),
                        |l| crate::util::escape_control(&crate::wire::url::redact(
                            &crate::util::truncate(l, 200)
                        ))
                        .into_owned()
                    )
                ),
                (Some(s), _) => format!("answered HTTP {s}{}", hint(s)),
                (None, Some(e)) => e.clone(),
                _ => String::new(),
            };
            return Err(BadInput(format!(
                "pre-flight: {} {shown} {what}: no load was sent (check --url and the profile's request; --no-preflight skips this check)",
                t.method
            ))
            .into());
        }
        out.push(Preflight {
            url: shown,
            status,
            error,
            latency_ms: ms,
        });
    }
    Ok(out)
}

pub fn failure_words(f: Failure) -> String {
    match f {
        Failure::ConnectRefused => "refused the connection (nothing listens on that port)".into(),
        Failure::ConnectOther => "could not be connected to".into(),
        Failure::Tls => {
            "failed the TLS handshake (its certificate: --ca-cert, or --insecure)".into()
        }
        Failure::Timeout => "did not answer within the request timeout".into(),
        Failure::Io => "broke the connection before answering".into(),
    }
}

fn hint(status: u16) -> &'static str {
    match status {
        404 => " (no webhook at that path: is the workflow published, and the path /webhook/… not /webhook-test/…?)",
        401 | 403 => " (the webhook wants credentials: add them to the profile's headers)",
        405 => " (the webhook takes another method: set the profile's request.method)",
        400 => " (the request body is malformed for it)",
        _ => "",
    }
}
