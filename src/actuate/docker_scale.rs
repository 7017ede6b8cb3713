//! A scale sweep's worker/runner pairs in a compose project, through the Docker API. A new pair copies the project's first worker and the
//! runner attached to it (image, command, environment, resources, compose labels; on the same
//! networks under its own name), the runner's `N8N_RUNNERS_TASK_BROKER_URI` pointed at its own
//! new worker (or, when the runner shares the worker's network namespace, the namespace of the
//! new worker); every new container carries the label [`SCALED_LABEL`]. Going below the workers
//! the project has stops the extra originals (worker first, so its jobs finish while its runner
//! still serves their Code tasks) and starts them again on the way back. Secrets are copied
//! from container to container as compose does; none is read into n8ncap's output.

use crate::record::scaling::ScaleStep;
use bollard::models::{ContainerCreateBody, ContainerInspectResponse, EndpointSettings};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, InspectContainerOptions, RemoveContainerOptionsBuilder,
    StopContainerOptionsBuilder,
};
use bollard::Docker;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// On every container n8ncap created: the container it was copied from.
pub const SCALED_LABEL: &str = "io.n8ncap.scaled-from";
/// How long a new container may take to report running.
const START_LIMIT: Duration = Duration::from_secs(60);
/// The stop grace given to a worker removed (n8n's N8N_GRACEFUL_SHUTDOWN_TIMEOUT is 30 s).
const STOP_GRACE_S: i32 = 35;

/// One worker and the runner attached to it (None: internal mode or no runner).
#[derive(Debug, Clone)]
struct Pair {
    worker: String,
    runner: Option<String>,
}

/// The project's pairs, those n8ncap added, and which originals it stopped.
pub struct DockerPairs {
    docker: Docker,
    original: Vec<Pair>,
    stopped: Vec<usize>,
    added: Vec<Pair>,
    template: (ContainerInspectResponse, Option<ContainerInspectResponse>),
    settle: Duration,
    project: String,
}

impl DockerPairs {
    /// The project's running workers, each with its runner, from its topology; refused when it
    /// has no worker.
    pub async fn discover(
        docker: Docker,
        topology: &crate::topology::Topology,
        project: &str,
        settle: Duration,
    ) -> anyhow::Result<DockerPairs> {
        let left = left_by_an_earlier_sweep(&docker, project).await?;
        if !left.is_empty() {
            return Err(crate::error::BadInput(format!(
                "compose project {} holds containers an earlier scale sweep made and did not \
                 remove ({}): remove them first (docker rm -f $(docker ps -aq --filter \
                 label={SCALED_LABEL})), or start the project again",
                crate::util::escape_control(project),
                left.join(", ")
            ))
            .into());
        }
        let mut original: Vec<Pair> = topology
            .workers()
            .map(|w| Pair {
                worker: w.name().to_string(),
                runner: topology
                    .nodes
                    .iter()
                    .find(|r| r.attached_to.as_deref() == Some(w.name()))
                    .map(|r| r.name().to_string()),
            })
            .collect();
        original.sort_by(|a, b| a.worker.cmp(&b.worker));
        let Some(first) = original.first() else {
            return Err(crate::error::BadInput(
                "the project has no running worker to copy: start one (n8n worker) first".into(),
            )
            .into());
        };
        let worker = inspect(&docker, &first.worker).await?;
        let runner = match &first.runner {
            Some(r) => Some(inspect(&docker, r).await?),
            None => None,
        };
        Ok(DockerPairs {
            docker,
            original,
            stopped: Vec::new(),
            added: Vec::new(),
            template: (worker, runner),
            settle,
            project: project.to_string(),
        })
    }

    /// The return read back from Docker: the project's original workers running, and the
    /// containers n8ncap made that are still there (both as Docker lists them now, not as this
    /// sweep did them). An error: Docker did not answer.
    pub async fn read_back(&self) -> anyhow::Result<(u32, Vec<String>)> {
        let mut running = 0;
        for p in &self.original {
            let c = inspect(&self.docker, &p.worker).await?;
            if c.state.and_then(|s| s.running) == Some(true) {
                running += 1;
            }
        }
        let left = left_by_an_earlier_sweep(&self.docker, &self.project).await?;
        Ok((running, left))
    }

    /// Workers the project had.
    pub fn original_count(&self) -> u32 {
        self.original.len() as u32
    }

    /// To `n` workers, each with its runner; then the settle time unless `restore`.
    pub async fn scale_to(&mut self, n: u32, restore: bool) -> ScaleStep {
        let started = Instant::now();
        let mut done = Vec::new();
        let result = self.reach(n as usize, &mut done).await;
        let failure = result.err().map(|e| format!("failed: {e:#}"));
        if failure.is_none() && !restore {
            tokio::time::sleep(self.settle).await;
        }
        ScaleStep {
            workers: n,
            command: format!(
                "Docker API: {}",
                if done.is_empty() {
                    "nothing to change".to_string()
                } else {
                    done.join("; ")
                }
            ),
            exit_code: failure.is_none().then_some(0),
            output: String::new(),
            seconds: started.elapsed().as_secs_f64(),
            settle_s: if failure.is_none() && !restore {
                self.settle.as_secs_f64()
            } else {
                0.0
            },
            restore,
            failure,
            queue_workers: None,
            joined: None,
            joined_after_s: None,
        }
    }

    async fn reach(&mut self, n: usize, done: &mut Vec<String>) -> anyhow::Result<()> {
        // Fewer added pairs first, then the originals stopped or started.
        while self.original.len() + self.added.len() > n && !self.added.is_empty() {
            let p = self.added.pop().expect("an added pair");
            self.retire(&p, true).await?;
            done.push(format!("removed {}", p.worker));
        }
        for i in (0..self.original.len()).rev() {
            let stopped = self.stopped.contains(&i);
            if i >= n && !stopped {
                let p = self.original[i].clone();
                self.retire(&p, false).await?;
                self.stopped.push(i);
                done.push(format!("stopped {}", p.worker));
            } else if i < n && stopped {
                let p = self.original[i].clone();
                let ready = self.start_pair(&p).await?;
                self.stopped.retain(|s| *s != i);
                done.push(format!("started {} ({ready})", p.worker));
            }
        }
        while self.original.len() + self.added.len() < n {
            let k = self.original.len() + self.added.len() + 1;
            let p = self.add(k).await?;
            let ready = ready(&self.docker, &p.worker).await;
            done.push(format!(
                "created {}{} ({ready})",
                p.worker,
                p.runner
                    .as_ref()
                    .map(|r| format!(" with runner {r}"))
                    .unwrap_or_default()
            ));
            self.added.push(p);
        }
        Ok(())
    }

    /// A new pair numbered `k`, created and started, running.
    async fn add(&self, k: usize) -> anyhow::Result<Pair> {
        let (w, r) = &self.template;
        let worker_name = format!("{}-n8ncap-{k}", name_of(w));
        let created = self.create(w, &worker_name, None).await?;
        self.start(&worker_name).await?;
        let runner_name = match r {
            Some(r) => {
                let name = format!("{}-n8ncap-{k}", name_of(r));
                self.create(r, &name, Some((&worker_name, &created)))
                    .await?;
                self.start(&name).await?;
                Some(name)
            }
            None => None,
        };
        Ok(Pair {
            worker: worker_name,
            runner: runner_name,
        })
    }

    /// A copy of `from` named `name`; a runner's copy (`worker` given: its name and id) is
    /// pointed at that worker.
    async fn create(
        &self,
        from: &ContainerInspectResponse,
        name: &str,
        worker: Option<(&str, &str)>,
    ) -> anyhow::Result<String> {
        let body = copy_of(from, name, worker);
        let opts = CreateContainerOptionsBuilder::default().name(name).build();
        let r = tokio::time::timeout(START_LIMIT, self.docker.create_container(Some(opts), body))
            .await
            .map_err(|_| anyhow::anyhow!("creating {name}: the Docker API did not answer"))?
            .map_err(|e| anyhow::anyhow!("creating {name}: {e}"))?;
        Ok(r.id)
    }

    async fn start(&self, name: &str) -> anyhow::Result<()> {
        start_running(&self.docker, name).await
    }

    /// Starts the pair (runner first) and says whether the worker reported ready.
    async fn start_pair(&self, p: &Pair) -> anyhow::Result<String> {
        if let Some(r) = &p.runner {
            self.start(r).await?;
        }
        self.start(&p.worker).await?;
        Ok(ready(&self.docker, &p.worker).await)
    }

    /// Stops the worker (its jobs finish within the grace), then its runner; removes both
    /// when n8ncap created them.
    async fn retire(&self, p: &Pair, remove: bool) -> anyhow::Result<()> {
        for name in std::iter::once(&p.worker).chain(p.runner.as_ref()) {
            let opts = StopContainerOptionsBuilder::default()
                .t(STOP_GRACE_S)
                .build();
            // A container already stopped answers 304: not an error here.
            if let Err(e) = self.docker.stop_container(name, Some(opts)).await {
                if !e.to_string().contains("304") {
                    anyhow::bail!("stopping {name}: {e}");
                }
            }
            if remove {
                let opts = RemoveContainerOptionsBuilder::default().force(true).build();
                self.docker
                    .remove_container(name, Some(opts))
                    .await
                    .map_err(|e| anyhow::anyhow!("removing {name}: {e}"))?;
            }
        }
        Ok(())
    }
}

/// Containers of `project` (running or not) that carry [`SCALED_LABEL`].
async fn left_by_an_earlier_sweep(docker: &Docker, project: &str) -> anyhow::Result<Vec<String>> {
    let mut filters = HashMap::new();
    filters.insert(
        "label".to_string(),
        vec![
            SCALED_LABEL.to_string(),
            format!("com.docker.compose.project={project}"),
        ],
    );
    let opts = bollard::query_parameters::ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let found = docker
        .list_containers(Some(opts))
        .await
        .map_err(|e| anyhow::anyhow!("listing containers: {e}"))?;
    Ok(found
        .into_iter()
        .flat_map(|c| c.names.unwrap_or_default())
        .map(|n| n.trim_start_matches('/').to_string())
        .collect())
}

/// How long a worker without `QUEUE_HEALTH_CHECK_ACTIVE=true` is probed before its readiness is
/// taken as not observable (n8n serves no health endpoint then).
const PROBE_UNANNOUNCED: Duration = Duration::from_secs(5);

/// Waits until a started worker answers 200 on `/healthz/readiness` (n8n: its database and
/// Redis connected, so it takes jobs), on its address in its first network and its
/// `QUEUE_HEALTH_CHECK_PORT`; what was seen, in words for the step's record.
async fn ready(docker: &Docker, name: &str) -> String {
    let t0 = Instant::now();
    let Ok(info) = inspect(docker, name).await else {
        return "readiness not read: the container could not be inspected".into();
    };
    let env: HashMap<String, String> = info
        .config
        .as_ref()
        .and_then(|c| c.env.clone())
        .unwrap_or_default()
        .iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let announced = env
        .get("QUEUE_HEALTH_CHECK_ACTIVE")
        .is_some_and(|v| v.trim() == "true");
    let port = env
        .get("QUEUE_HEALTH_CHECK_PORT")
        .and_then(|p| p.trim().parse::<u16>().ok())
        .unwrap_or(5678);
    let ip = info
        .network_settings
        .and_then(|n| n.networks)
        .and_then(|n| {
            n.into_values()
                .find_map(|e| e.ip_address.filter(|a| !a.is_empty()))
        });
    let Some(ip) = ip else {
        return "readiness not observable: no container address".into();
    };
    let url = format!("http://{ip}:{port}/healthz/readiness");
    let mut answered = false;
    while t0.elapsed() < START_LIMIT {
        match crate::wire::http::http_get(&url, Duration::from_secs(1)).await {
            Ok((200, _)) => {
                return format!(
                    "ready after {:.1} s: /healthz/readiness",
                    t0.elapsed().as_secs_f64()
                )
            }
            Ok(_) => answered = true,
            Err(_) => {}
        }
        if !announced && !answered && t0.elapsed() > PROBE_UNANNOUNCED {
            return "readiness not observable (QUEUE_HEALTH_CHECK_ACTIVE is not true): the settle time only".into();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    format!(
        "not ready within {} s: measured anyway",
        START_LIMIT.as_secs()
    )
}

/// Starts a container and waits until Docker reports it running (healthy, when it has a
/// health check).
pub(super) async fn start_running(docker: &Docker, name: &str) -> anyhow::Result<()> {
    docker
        .start_container(name, None)
        .await
        .map_err(|e| anyhow::anyhow!("starting {name}: {e}"))?;
    let deadline = Instant::now() + START_LIMIT;
    loop {
        let info = inspect(docker, name).await?;
        let state = info.state.unwrap_or_default();
        let health = state.health.and_then(|h| h.status).map(|s| s.to_string());
        let running = state.running == Some(true);
        if running
            && health
                .as_deref()
                .is_none_or(|h| h == "healthy" || h == "none")
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "{name} did not report running{} within {} s",
                if health.is_some() { " and healthy" } else { "" },
                START_LIMIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(super) async fn inspect(
    docker: &Docker,
    name: &str,
) -> anyhow::Result<ContainerInspectResponse> {
    tokio::time::timeout(
        START_LIMIT,
        docker.inspect_container(name, None::<InspectContainerOptions>),
    )
    .await
    .map_err(|_| anyhow::anyhow!("inspecting {name}: the Docker API did not answer"))?
    .map_err(|e| anyhow::anyhow!("inspecting {name}: {e}"))
}

fn name_of(c: &ContainerInspectResponse) -> String {
    c.name
        .clone()
        .unwrap_or_default()
        .trim_start_matches('/')
        .to_string()
}

/// What creating a copy of `from` named `name` sends: its configuration without what made it
/// one container (its hostname, addresses, host ports), its compose number moved on, marked as
/// n8ncap's; a runner's broker pointed at `worker`.
fn copy_of(
    from: &ContainerInspectResponse,
    name: &str,
    worker: Option<(&str, &str)>,
) -> ContainerCreateBody {
    let c = from.config.clone().unwrap_or_default();
    let mut labels = c.labels.clone().unwrap_or_default();
    labels.insert(SCALED_LABEL.into(), name_of(from));
    if let Some(k) = name.rsplit('-').next() {
        labels.insert("com.docker.compose.container-number".into(), k.into());
    }
    let mut host = from.host_config.clone().unwrap_or_default();
    host.port_bindings = None;
    let shares_namespace = host
        .network_mode
        .as_deref()
        .is_some_and(|m| m.starts_with("container:"));
    let mut env = c.env.clone().unwrap_or_default();
    if let Some((worker_name, worker_id)) = worker {
        if shares_namespace {
            host.network_mode = Some(format!("container:{worker_id}"));
        } else {
            for kv in env.iter_mut() {
                if let Some(uri) = kv.strip_prefix("N8N_RUNNERS_TASK_BROKER_URI=") {
                    *kv = format!(
                        "N8N_RUNNERS_TASK_BROKER_URI={}",
                        with_host(uri, worker_name)
                    );
                }
            }
        }
    }
    let networking_config = (!shares_namespace).then(|| {
        let nets = from
            .network_settings
            .as_ref()
            .and_then(|n| n.networks.clone())
            .unwrap_or_default();
        // On the project's networks by its own name only: the service's alias stays with the
        // originals, so a runner that reconnects to `n8n-worker` finds its own worker again
        // instead of Docker's round robin handing it a copy.
        let endpoints: HashMap<String, EndpointSettings> = nets
            .into_keys()
            .map(|net| (net, EndpointSettings::default()))
            .collect();
        bollard::models::NetworkingConfig {
            endpoints_config: Some(endpoints),
        }
    });
    ContainerCreateBody {
        hostname: None,
        domainname: c.domainname,
        user: c.user,
        exposed_ports: c.exposed_ports,
        env: Some(env),
        cmd: c.cmd,
        healthcheck: c.healthcheck,
        image: c.image,
        volumes: c.volumes,
        working_dir: c.working_dir,
        entrypoint: c.entrypoint,
        labels: Some(labels),
        stop_signal: c.stop_signal,
        stop_timeout: c.stop_timeout,
        host_config: Some(host),
        networking_config,
        ..Default::default()
    }
}

/// `uri` with its host replaced by `host` (scheme, port and path kept).
fn with_host(uri: &str, host: &str) -> String {
    let (scheme, rest) = uri.split_once("://").unwrap_or(("http", uri));
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let port = authority
        .rsplit_once(':')
        .filter(|(_, p)| p.chars().all(|c| c.is_ascii_digit()))
        .map(|(_, p)| format!(":{p}"))
        .unwrap_or_default();
    format!("{scheme}://{host}{port}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_uri_gets_the_new_worker_as_its_host() {
        assert_eq!(
            with_host("http://n8n-worker:5679", "p-n8n-worker-1-n8ncap-2"),
            "http://p-n8n-worker-1-n8ncap-2:5679"
        );
        assert_eq!(with_host("http://w/x", "v"), "http://v/x");
        assert_eq!(with_host("w:5679", "v"), "http://v:5679");
    }

    #[test]
    fn a_copy_joins_the_networks_by_its_own_name_and_its_runner_follows_it() {
        let mut from = ContainerInspectResponse {
            id: Some("abcdef123456789".into()),
            name: Some("/p-runner-1".into()),
            ..Default::default()
        };
        from.config = Some(bollard::models::ContainerConfig {
            hostname: Some("abcdef123456".into()),
            env: Some(vec![
                "N8N_RUNNERS_TASK_BROKER_URI=http://n8n-worker:5679".into(),
                "N8N_RUNNERS_MAX_CONCURRENCY=5".into(),
            ]),
            ..Default::default()
        });
        let mut nets = HashMap::new();
        nets.insert(
            "p_default".to_string(),
            EndpointSettings {
                aliases: Some(vec![
                    "runner".into(),
                    "p-runner-1".into(),
                    "abcdef123456".into(),
                ]),
                ip_address: Some("172.18.0.5".into()),
                ..Default::default()
            },
        );
        from.network_settings = Some(bollard::models::NetworkSettings {
            networks: Some(nets),
            ..Default::default()
        });
        let body = copy_of(
            &from,
            "p-runner-1-n8ncap-2",
            Some(("p-w-1-n8ncap-2", "id2")),
        );
        assert_eq!(body.hostname, None);
        let env = body.env.unwrap();
        assert!(env.contains(&"N8N_RUNNERS_TASK_BROKER_URI=http://p-w-1-n8ncap-2:5679".into()));
        assert!(env.contains(&"N8N_RUNNERS_MAX_CONCURRENCY=5".into()));
        let labels = body.labels.unwrap();
        assert_eq!(labels[SCALED_LABEL], "p-runner-1");
        assert_eq!(labels["com.docker.compose.container-number"], "2");
        let e = &body.networking_config.unwrap().endpoints_config.unwrap()["p_default"];
        assert_eq!(e.aliases, None);
        assert_eq!(e.ip_address, None);
    }
}
