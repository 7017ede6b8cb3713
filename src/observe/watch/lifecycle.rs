//! Docker's events for the watched containers: deaths, OOM kills and restarts, stamped with the
//! stage under way.

use super::*;

/// Follows the Docker events stream for the watched containers: each lifecycle event is
/// written to the timeline with the stage it fell in and kept for that stage; a `die` is
/// followed by an `inspect` for `State.OOMKilled` and the exit code.
pub(super) async fn follow_lifecycle(
    state: Arc<Mutex<State>>,
    d: Docker,
    containers: Vec<WatchedContainer>,
) {
    use futures_util::StreamExt;
    let ids: Vec<String> = containers.iter().map(|c| c.id.clone()).collect();
    let stream = docker::lifecycle_events(&d, &ids);
    futures_util::pin_mut!(stream);
    let mut books = EventBooks::default();
    while let Some(ev) = stream.next().await {
        let Some(c) = containers.iter().find(|c| c.id == ev.id) else {
            continue;
        };
        // The same action again (a die while down, a start while up) adds nothing.
        if !books.news(&ev) {
            continue;
        }
        let (oom_killed, exit_code) = if ev.action == LifecycleAction::Die {
            match docker::state(&d, &c.id).await {
                // Running since before the event: the container did not die — the event is
                // refuted by its state, and left out.
                Ok(s) if s.running && started_before(s.started_at.as_deref(), ev.unix) => {
                    books.refuted += 1;
                    books.undo(&ev);
                    // Said in the timeline at 1, 2, 4, 8 … and every thousand: not once per event.
                    if books.refuted.is_power_of_two() || books.refuted % 1000 == 0 {
                        if let Ok(mut st) = state.lock() {
                            let t = st.started.elapsed().as_secs_f64();
                            st.timeline.write(&Event::Gap {
                                t,
                                unix: ev.unix,
                                source: format!("{} (Docker events)", c.name),
                                error: format!(
                                    "{} die event(s) refuted: the container runs since before them",
                                    books.refuted
                                ),
                                gone: false,
                            });
                        }
                    }
                    continue;
                }
                Ok(s) => (s.oom_killed, ev.exit_code.or(s.exit_code)),
                Err(_) => (false, ev.exit_code),
            }
        } else {
            (false, ev.exit_code)
        };
        if books.recorded >= MAX_LIFECYCLE_EVENTS {
            continue;
        }
        books.recorded += 1;
        // Why it died, when n8n said so: its last lines about Redis.
        let redis_lost = ev.action == LifecycleAction::Die
            && crate::observe::redis_log::exited_for_redis(&d, &c.id).await;
        let Ok(mut st) = state.lock() else { return };
        record_lifecycle(&mut st, c, ev, (oom_killed, redis_lost), exit_code);
    }
}

pub(super) fn record_lifecycle(
    st: &mut State,
    c: &WatchedContainer,
    ev: docker::Lifecycle,
    (oom_killed, redis_lost): (bool, bool),
    exit_code: Option<i64>,
) {
    match ev.action {
        LifecycleAction::Die | LifecycleAction::Destroy => {
            st.down.insert(c.id.clone());
        }
        LifecycleAction::Start => {
            st.down.remove(&c.id);
            st.restarted.insert(c.id.clone());
        }
        _ => {}
    }
    let t = st.started.elapsed().as_secs_f64();
    let stage = st.stage.map(|(i, _)| i);
    st.timeline.write(&Event::Lifecycle {
        t,
        unix: ev.unix,
        stage,
        name: c.name.clone(),
        role: c.role,
        action: ev.action,
        exit_code,
        oom_killed,
    });
    st.timeline.flush();
    let at_s = st
        .stage
        .map_or(0.0, |(_, since)| since.elapsed().as_secs_f64());
    let acc = st.acc.containers.entry(c.name.clone()).or_default();
    acc.role = Some(c.role);
    acc.cpu_limit_cores = c.cpu_limit_cores;
    acc.events.push(LifecycleEvent {
        at_s,
        unix: ev.unix,
        action: ev.action,
        exit_code,
        oom_killed,
        redis_lost,
    });
}
