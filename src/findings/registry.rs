//! Every finding id n8ncap can report, in one table: its spelling (the one serde writes and
//! reads), where it is found (a run's diagnosis, the audit of a configuration, the audit of live
//! containers only, or both), its default severity, its one-line meaning and what to change.
//! An id has one meaning wherever it is found: `worker-without-runner` is a worker with no runner
//! to take its Code tasks, read from a configuration (audit) or from a run's HTTP 500s after the
//! task request timeout (diagnosis). The lists in `docs/diagnose.md` (a run's findings) and `docs/audit.md` (the rules) are kept
//! equal to this table by a test.

use super::Severity;
use serde::{Deserialize, Serialize};

/// Where a finding is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A run's diagnosis (a sweep, a k6 file, a saved directory, Prometheus history).
    Run,
    /// An audit of compose files, manifests or live containers.
    Audit,
    /// An audit of live containers only (their state: OOM kills, restarts); no file has it.
    Live,
    /// Both the audit and a run's diagnosis.
    Both,
    /// The audit with `--upgrade VERSION`: what that n8n version changes.
    Upgrade,
}

/// One row of the table.
#[derive(Debug)]
pub struct Entry {
    pub id: &'static str,
    pub scope: Scope,
    pub severity: Severity,
    /// What it means, in one line.
    pub summary: &'static str,
    /// What to change, in general (a finding's own `fix` names the service and the value).
    pub fix: &'static str,
}

macro_rules! registry {
    ($( $variant:ident = $id:literal, $scope:ident, $sev:ident, $summary:literal, $fix:literal; )*) => {
        /// A finding's id. Serialised as its kebab-case spelling (`runner-limit-caps`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum FindingId {
            $( #[serde(rename = $id)] $variant, )*
        }

        impl FindingId {
            /// Every id, in the table's order.
            pub const ALL: &'static [FindingId] = &[ $( FindingId::$variant, )* ];
            const TABLE: &'static [Entry] = &[ $( Entry {
                id: $id,
                scope: Scope::$scope,
                severity: Severity::$sev,
                summary: $summary,
                fix: $fix,
            }, )* ];
        }
    };
}

registry! {
    // ── a run's diagnosis: what caps throughput ──
    RunnerLimitCaps = "runner-limit-caps", Run, Error,
        "the runners' task limit caps throughput: executions wait for a runner task while holding a worker slot",
        "raise N8N_RUNNERS_MAX_CONCURRENCY on the runners (or add runners per worker), keeping runner capacity ≥ worker concurrency";
    WorkerConcurrencyCaps = "worker-concurrency-caps", Run, Warning,
        "worker concurrency caps throughput: every worker slot is taken and jobs wait in Redis",
        "raise worker concurrency (--concurrency) or add workers, each with its runner";
    CpuLimitCaps = "cpu-limit-caps", Run, Error,
        "a process's CPU caps throughput before any n8n setting does",
        "give the saturated process more cores (more workers or runners, a higher CPU limit) or cut the CPU per execution";
    MainIntakeCaps = "main-intake-caps", Run, Error,
        "main's intake caps throughput: main's one thread receives and enqueues every execution, whatever the workers could run",
        "add webhook processors (n8n webhook) behind the load balancer, or give main a faster core; more workers will not help";
    RedisCaps = "redis-caps", Run, Error,
        "the queue's Redis caps throughput: its one thread runs every Bull command of main and the workers",
        "give Redis a faster core or a host of its own (a Redis Cluster does not spread one Bull queue), keep other clients off it; more workers will not help";
    ProductionLimitCaps = "production-limit-caps", Run, Warning,
        "N8N_CONCURRENCY_PRODUCTION_LIMIT caps the executions main (regular mode) runs at once",
        "raise N8N_CONCURRENCY_PRODUCTION_LIMIT, or move to queue mode with workers";
    DbPoolCaps = "db-pool-caps", Run, Error,
        "the workers' database pools cap throughput: executions hold a slot while they wait for a connection (Little's law at the pool)",
        "raise DB_POSTGRESDB_POOL_SIZE on the workers within Postgres max_connections, and DB_PING_TIMEOUT_MS above the pool's acquire p99";
    PostgresConnectionsExhausted = "postgres-connections-exhausted", Run, Error,
        "Postgres refused connections (SQLSTATE 53300, too many clients): the processes' pools together exceed max_connections",
        "keep Σ DB_POSTGRESDB_POOL_SIZE × processes (at their autoscaler maxima) within max_connections − superuser_reserved_connections: lower the pools, raise max_connections, or put PgBouncer (transaction mode) in front";
    JobTimeGrows = "job-time-grows", Run, Warning,
        "every job slowed under load while the slots were full: a shared resource (the host's CPU, the database), not a lower slot limit",
        "compare n8n's processes' cores with the host's; near them, spread the workers over more hosts or cores";
    FailuresWithoutCause = "failures-without-cause", Run, Warning,
        "answers failed with n8n's generic HTTP 500 and nothing watched names why (n8n's answers never name the cause)",
        "sweep again with --docker (n8n's logs) or --postgres-env (Postgres' connections), or read n8n's logs for \"Problem with execution\"";
    ExecutionsLeftRunning = "executions-left-running", Run, Warning,
        "executions of the run stay new or running in n8n's table: the write that would have ended them was refused",
        "find them (status new or running, created during the run) and stop them in n8n's executions list, or mark them crashed in SQL; then fix what refused the write";
    LimitsInseparable = "limits-inseparable", Run, Info,
        "worker concurrency and runner capacity are equal: the run cannot tell which of the two caps",
        "raise both together (runner capacity ≥ worker concurrency), then sweep again";
    UnmodelledLimit = "unmodelled-limit", Run, Error,
        "throughput stays flat under every limit the model knows: something else caps it",
        "look at what the model does not see (database, Redis, proxy, external calls); sweep with --docker and --metrics";
    SettingsDisagree = "settings-disagree", Run, Warning,
        "the measured throughput is above what the settings allow: the settings given are not the ones running",
        "check the settings the containers run with (n8ncap inspect reads them)";
    ModelMismatch = "model-mismatch", Run, Warning,
        "the measured ceiling is far under the named limit's bound: the verdict is hedged",
        "sweep again with --docker or --metrics: a saturated CPU or an unmodelled limit is the usual cause";
    CeilingReached = "ceiling-reached", Run, Warning,
        "throughput is flat while the load and p95 grow",
        "raise the limit the verdict names; more load only lengthens the wait";
    QueueBacklog = "queue-backlog", Run, Info,
        "jobs waited in Redis: every worker slot was taken",
        "raise the limit the verdict names";
    QueueModeLiftsCpu = "queue-mode-lifts-cpu", Run, Warning,
        "regular mode runs everything on main's one core; queue mode with workers would lift that bound",
        "set EXECUTIONS_MODE=queue with Redis on main and workers, start workers each with its runner, and sweep again";
    MixConsumption = "mix-consumption", Run, Info,
        "what each kind of request in a mix consumed of the capping limit",
        "";
    // ── a run's diagnosis: can the measurement be believed ──
    MeasurementInvalid = "measurement-invalid", Run, Error,
        "checks failed: the responses are not the executions the load meant to run",
        "fix what the failing checks say (wrong webhook, errors) before reading the figures";
    LevelImpossible = "level-impossible", Run, Warning,
        "a level breaks Little's law or its own books and is left out",
        "re-run the level, or read the raw k6 output (--out json) instead of a summary";
    WarmupTooShort = "warmup-too-short", Run, Warning,
        "the warm-up is shorter than the responses: the first window holds start-up",
        "lengthen the warm-up to at least 2 × p50 (at least 1 s)";
    TimeoutSignature = "timeout-signature", Run, Error,
        "every request fails the same way after the same time: a timeout",
        "find the timeout that matches the time (proxy, client, n8n's EXECUTIONS_TIMEOUT)";
    FastFailuresHideLatency = "fast-failures-hide-latency", Run, Error,
        "failures answer faster than successes and pull the latency down",
        "read the latency of the successful responses only; fix the failures first";
    ConnectionChurn = "connection-churn", Run, Warning,
        "the client opened a new connection for most requests",
        "check the proxy in front of n8n (keep-alive to the client) or the server's Connection: close";
    LoadGeneratorSaturated = "load-generator-saturated", Run, Warning,
        "the load generator was the limit: dropped iterations or its own CPU near its cores",
        "give the load generator more cores or VUs (preAllocatedVUs), or run it on another machine";
    RampWindows = "ramp-windows", Run, Info,
        "a ramp was read as windows, not as levels",
        "";
    RampTooFast = "ramp-too-fast", Run, Warning,
        "the ramp changes the load faster than a response takes: its windows are not steady",
        "hold each step longer than a few response times";
    // ── a run's diagnosis: processes and memory ──
    CpuBoundProcess = "cpu-bound-process", Run, Warning,
        "a process (or the host) ran near its usable cores at the ceiling",
        "spread the load: more workers (each with its runner), more runners per worker, or a faster CPU";
    MemoryInRunner = "memory-in-runner", Run, Warning,
        "memory grows in the runner, not the worker (heap flat, RSS up)",
        "set a memory limit on every runner; find the Code node that holds memory";
    UploadMemory = "upload-memory", Run, Info,
        "uploads held in memory: n8n's binary data mode keeps them in the process",
        "set N8N_DEFAULT_BINARY_DATA_MODE to s3 (or database) in queue mode for large uploads";
    RunnerTaskMemory = "runner-task-memory", Run, Info,
        "a runner's memory per running task, above its base, measured",
        "set each runner's memory limit to N8N_RUNNERS_MAX_CONCURRENCY × the per-task memory + the base, with headroom";
    ContainerGone = "container-gone", Run, Warning,
        "a watched container disappeared during the run",
        "find what removed or recreated it; re-run once the stack stays up";
    RunnerOomKilled = "runner-oom-killed", Run, Error,
        "a runner was killed for memory: the Code tasks it held failed",
        "raise the runner's memory limit to its limit × the per-task memory + the base, or lower N8N_RUNNERS_MAX_CONCURRENCY";
    WorkerOomKilled = "worker-oom-killed", Run, Error,
        "a worker was killed for memory: the executions in its slots failed",
        "raise the worker's memory limit or lower its concurrency";
    MainOomKilled = "main-oom-killed", Run, Error,
        "main (or a webhook process) was killed for memory: the webhook stopped answering",
        "raise main's memory limit; move large payloads out of memory";
    ContainerOomKilled = "container-oom-killed", Run, Error,
        "a container was killed for memory during the run",
        "raise its memory limit";
    ContainerExited = "container-exited", Run, Error,
        "a container exited during the run: what it held was lost",
        "read its logs (docker logs) for why it ended";
    RedisConnectionLost = "redis-connection-lost", Run, Error,
        "an n8n process exited because Redis was gone past QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD: what it held got no answer",
        "keep Redis up (a restart policy, a replica); a restart policy on every n8n service brings them back";
    ContainerRestarted = "container-restarted", Run, Warning,
        "a container restarted during the run",
        "find why it restarted (docker logs, docker inspect State); re-run the stage once it stays up";
    MemoryPerExecution = "memory-per-execution", Run, Info,
        "a process's memory grows with the executions it holds: a base and a slope per execution, and the limit its concurrency needs",
        "give it the memory limit its concurrency needs, and size a higher concurrency by the slope";
    MemoryLimitBelowNeed = "memory-limit-below-need", Run, Warning,
        "a container's memory limit is below what its configured concurrency was measured to need",
        "raise the limit to the recommended one, or lower the concurrency";
    HostShared = "host-shared", Run, Warning,
        "processes outside the stack used a share of the host's cores during the saturated level",
        "measure on a host the stack has to itself, or read the ceiling as the contention's";
    QueueRefreshMismatch = "queue-refresh-mismatch", Run, Warning,
        "n8n's queue gauges refreshed less often than the queue-metrics interval given: the interval measured is used",
        "give --queue-metrics-interval as main's N8N_METRICS_QUEUE_METRICS_INTERVAL, or lower that setting on main";
    // ── Prometheus history ──
    SlotsBind = "slots-bind", Run, Info,
        "Little's law at the slots: completions/s × n8n's slot time ≈ the slots taken while jobs waited — the slots are where executions queue",
        "raise worker concurrency if a slot's time is the workflow's own work; give --code-time to tell it from waiting for a runner";
    QueueStalled = "queue-stalled", Run, Error,
        "jobs waited in Redis while worker slots stood free",
        "check the workers' Redis connection and Bull's stalled-job settings (QUEUE_WORKER_LOCK_DURATION, QUEUE_WORKER_STALLED_INTERVAL)";
    HistoryCoarse = "history-coarse", Run, Info,
        "the history's samples are too far apart to see a level",
        "set N8N_METRICS_QUEUE_METRICS_INTERVAL=5 (or lower) on main";
    CounterReset = "counter-reset", Run, Warning,
        "a counter fell: a process restarted inside the history",
        "find why the process restarted (OOM kills, crashes)";
    HistoryGaps = "history-gaps", Run, Info,
        "steps of the history had no sample and are left out",
        "";
    // ── both: the pairing of workers and runners ──
    WorkerWithoutRunner = "worker-without-runner", Both, Error,
        "a worker has no runner to take its Code tasks (audit: none attached, replicas counted; run: HTTP 500 after the task request timeout)",
        "attach a runner to every worker: N8N_RUNNERS_TASK_BROKER_URI pointing at it, N8N_RUNNERS_MODE=external and N8N_RUNNERS_BROKER_LISTEN_ADDRESS=0.0.0.0 on the worker";
    // ── the audit ──
    NotQueueMode = "not-queue-mode", Audit, Error,
        "main and workers must run with EXECUTIONS_MODE=queue",
        "set EXECUTIONS_MODE=queue on main and every worker";
    ExternalModeWithoutRunner = "external-mode-without-runner", Audit, Error,
        "N8N_RUNNERS_MODE=external but no runner service exists",
        "add an n8nio/runners service per worker, or unset N8N_RUNNERS_MODE";
    MainWithoutRunner = "main-without-runner", Audit, Warning,
        "main in external mode has no runner and does not offload manual executions",
        "attach a runner to main, or set OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS=true";
    RunnerWithoutExternalMode = "runner-without-external-mode", Audit, Error,
        "a runner points at an n8n process that is not in external mode",
        "set N8N_RUNNERS_MODE=external on the n8n process the runner connects to";
    RunnerBrokerUnresolved = "runner-broker-unresolved", Audit, Error,
        "a runner's N8N_RUNNERS_TASK_BROKER_URI names no n8n service",
        "point N8N_RUNNERS_TASK_BROKER_URI at the worker's service and port (5679)";
    BrokerNotListeningForRunners = "broker-not-listening-for-runners", Audit, Error,
        "the task broker listens on 127.0.0.1, so runner containers cannot connect",
        "set N8N_RUNNERS_BROKER_LISTEN_ADDRESS=0.0.0.0 on the worker";
    RunnerTokenMismatch = "runner-token-mismatch", Audit, Error,
        "runner and n8n have different N8N_RUNNERS_AUTH_TOKEN",
        "give the runner and its n8n process the same N8N_RUNNERS_AUTH_TOKEN (one secret)";
    RunnerLimitOnWrongContainer = "runner-limit-on-wrong-container", Audit, Warning,
        "N8N_RUNNERS_MAX_CONCURRENCY set on main/worker in external mode has no effect",
        "set N8N_RUNNERS_MAX_CONCURRENCY on the runner container";
    RunnerLimitBelowWorkerConcurrency = "runner-limit-below-worker-concurrency", Audit, Warning,
        "runner capacity below worker concurrency caps Code-heavy throughput",
        "raise N8N_RUNNERS_MAX_CONCURRENCY (or runners per worker) to at least the worker's concurrency";
    ProcessWithoutRestartPolicy = "process-without-restart-policy", Audit, Error,
        "an n8n process in queue mode with no restart policy: a Redis outage past QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD ends it for good",
        "set restart: always (or unless-stopped, on-failure) on every n8n service, as n8n's own compose examples do";
    PostgresOutOfConnections = "postgres-out-of-connections", Live, Error,
        "the live Postgres is out of connections now: it refused n8ncap's, or every slot but the reserved ones is open",
        "find who holds them (pg_stat_activity by application); lower the pools × processes, raise max_connections, or put PgBouncer in front";
    PostgresConnections = "postgres-connections", Live, Info,
        "the live Postgres's connections open against what max_connections leaves (a DSN audited on its own)",
        "keep Σ DB_POSTGRESDB_POOL_SIZE × processes within what Postgres leaves";
    RedisWithoutRestartPolicy = "redis-without-restart-policy", Audit, Warning,
        "the queue's Redis is one container with no restart policy: once it stops, nothing brings it back",
        "set restart: always (or unless-stopped) on the Redis service";
    RedisTimeoutThreshold = "redis-timeout-threshold", Audit, Info,
        "how long n8n's processes outlive a Redis outage (QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD) against what restarts Redis",
        "keep Redis' restart or failover under the threshold, or raise the threshold above it";
    RunnerWithoutMemoryLimit = "runner-without-memory-limit", Audit, Warning,
        "a runner has no memory limit; Code-node memory lands there",
        "set a memory limit on every runner";
    MemoryLimitOnWorkerNotRunner = "memory-limit-on-worker-not-runner", Audit, Warning,
        "the worker has a memory limit, its runner does not",
        "set a memory limit on the runner too: Code-node memory lands there, not in the worker";
    ProductionLimitOverridesConcurrency = "production-limit-overrides-concurrency", Audit, Warning,
        "N8N_CONCURRENCY_PRODUCTION_LIMIT silently overrides --concurrency",
        "remove N8N_CONCURRENCY_PRODUCTION_LIMIT from workers, or set it to the concurrency meant";
    QueueWorkerConcurrencyNoop = "queue-worker-concurrency-noop", Audit, Warning,
        "QUEUE_WORKER_CONCURRENCY is not an n8n setting",
        "use the worker's --concurrency flag (or N8N_CONCURRENCY_PRODUCTION_LIMIT)";
    MetricsOff = "metrics-off", Audit, Warning,
        "N8N_METRICS is not enabled on main or a worker",
        "set N8N_METRICS=true on main and every worker";
    QueueMetricsOff = "queue-metrics-off", Audit, Warning,
        "main does not expose the queue gauges",
        "set N8N_METRICS_INCLUDE_QUEUE_METRICS=true on main";
    VersionSkew = "version-skew", Both, Warning,
        "main, workers and webhook processors run different n8n versions",
        "run one n8n version (one image tag variable) on main, every worker and webhook processor";
    RunnerImageMismatch = "runner-image-mismatch", Audit, Warning,
        "the runner image version differs from the n8n image version",
        "use the same tag for n8nio/runners and n8nio/n8n";
    EncryptionKeyMismatch = "encryption-key-mismatch", Audit, Error,
        "main and workers do not share one N8N_ENCRYPTION_KEY",
        "give main and every worker the same N8N_ENCRYPTION_KEY (one secret)";
    DbConnectionsExhausted = "db-connections-exhausted", Audit, Error,
        "Postgres pool size × n8n processes reaches max_connections",
        "lower DB_POSTGRESDB_POOL_SIZE, raise Postgres max_connections, or put a pooler in between";
    DbPoolBelowConcurrency = "db-pool-below-concurrency", Audit, Info,
        "a worker's database pool is smaller than its concurrency: it caps at pool ÷ database time, whatever the slots allow",
        "raise DB_POSTGRESDB_POOL_SIZE toward the worker's concurrency, within Postgres max_connections";
    WebhookDefaultPool = "webhook-default-pool", Audit, Warning,
        "a webhook processor runs on n8n's default database pool of 2 connections",
        "set DB_POSTGRESDB_POOL_SIZE on the webhook processors, within Postgres max_connections";
    DbPingTimeoutDefault = "db-ping-timeout-default", Audit, Info,
        "the database ping keeps n8n's 5 s default timeout on processes whose pool can be full",
        "set DB_PING_TIMEOUT_MS above the pool's acquire p99";
    PostgresVersionUnsupported = "postgres-version-unsupported", Audit, Warning,
        "the executions' Postgres is older than 16: n8n 2.41 logs it as not supported (17 and newer are, 16 on compatibility support)",
        "upgrade Postgres to 17 (or at least 16) before n8n drops what it still tolerates";
    PostgresTlsUnverified = "postgres-tls-unverified", Audit, Info,
        "n8n talks to Postgres over TLS without checking the server's certificate (DB_POSTGRESDB_SSL_REJECT_UNAUTHORIZED=false)",
        "give DB_POSTGRESDB_SSL_CA the CA that signed the server's certificate and drop DB_POSTGRESDB_SSL_REJECT_UNAUTHORIZED=false";
    DbConnectionBudget = "db-connection-budget", Audit, Info,
        "the Postgres connections n8n needs at the maximum replicas",
        "";
    // ── audit --run DIR: the time budget against a run's measurements ──
    ScaleDownBeforeJobsFinish = "scale-down-before-jobs-finish", Audit, Warning,
        "an autoscaler removes a worker sooner after the load drops than a p99 job runs",
        "raise the scale-down stabilisation window (or KEDA's cooldownPeriod) above the p99 job time";
    ShutdownWindowBelowJobTime = "shutdown-window-below-job-time", Audit, Warning,
        "a worker's shutdown window (or the 0.8 × of it a Code task gets) is shorter than the p99 job measured",
        "raise N8N_GRACEFUL_SHUTDOWN_TIMEOUT above the p99 job time, and terminationGracePeriodSeconds with it";
    TaskTimeoutBelowCodeTime = "task-timeout-below-code-time", Audit, Error,
        "the runner task timeout in force is shorter than the p99 Code time measured",
        "raise N8N_RUNNERS_TASK_TIMEOUT above the p99 Code time";
    LockMarginBelowEventLoopLag = "lock-margin-below-event-loop-lag", Audit, Error,
        "Bull's job lock margin (duration − renew time) is not above the workers' event-loop lag measured",
        "raise QUEUE_WORKER_LOCK_DURATION, and find what blocks the event loop";
    AlertThresholdFar = "alert-threshold-far", Audit, Warning,
        "an existing alert on n8n's queue series fires far from the measured capacity: a waiting-jobs threshold past what callers can wait, or a completion rate above the measured ceiling",
        "alert on the queue's wait and on 2/3 and 90 % of the measured ceiling (recommend RUN --format prometheus-rules)";
    // ── audit --upgrade 3.0: what n8n 3.0 changes (n8n docs, "n8n 3.0 breaking changes") ──
    UpgradeTaskTimeout = "upgrade-task-timeout", Upgrade, Warning,
        "N8N_RUNNERS_TASK_TIMEOUT unset where Code runs: n8n 3.0 lowers its default from 300 s to 60 s",
        "set N8N_RUNNERS_TASK_TIMEOUT to what the longest Code task needs";
    UpgradeManualExecutionsOnWorkers = "upgrade-manual-executions-on-workers", Upgrade, Warning,
        "manual executions run on main today; n8n 3.0 removes OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS and runs them on the workers",
        "size worker slots and memory for manual executions too; remove the variable";
    UpgradeDbPingTimeoutRenamed = "upgrade-db-ping-timeout-renamed", Upgrade, Error,
        "N8N_DB_PING_TIMEOUT is no longer read in n8n 3.0",
        "set DB_PING_TIMEOUT_MS instead";
    UpgradeBinaryDataModeDefault = "upgrade-binary-data-mode-default", Upgrade, Error,
        "N8N_DEFAULT_BINARY_DATA_MODE=default is no longer valid in n8n 3.0 (it switches to filesystem)",
        "set N8N_DEFAULT_BINARY_DATA_MODE to database or s3 (queue mode), or filesystem";
    WorkerReplicasUnset = "worker-replicas-unset", Audit, Warning,
        "a worker workload without replicas and without an autoscaler runs one pod",
        "set the worker's replicas, or an autoscaler";
    WorkerScaling = "worker-scaling", Audit, Info,
        "worker pods and slots at the autoscaler's minimum and maximum",
        "";
    WorkerAutoscaledOnCpu = "worker-autoscaled-on-cpu", Audit, Warning,
        "workers scaled on CPU or memory, not on the jobs waiting in Redis",
        "scale workers with KEDA's Redis trigger on <QUEUE_BULL_PREFIX>:jobs:wait";
    AutoscalerWrongQueue = "autoscaler-wrong-queue", Audit, Error,
        "a KEDA Redis trigger watches a list or database n8n does not use: it never fires",
        "point the trigger's listName at <QUEUE_BULL_PREFIX>:jobs:wait and its database at QUEUE_BULL_REDIS_DB";
    AutoscalerWaitingOnly = "autoscaler-waiting-only", Audit, Warning,
        "the workers' autoscaler counts only the waiting jobs: it removes workers that still run jobs",
        "count waiting and active jobs together: a trigger on <QUEUE_BULL_PREFIX>:jobs:active beside the one on :jobs:wait, added by advanced.scalingModifiers.formula (KEDA >= 2.12)";
    AutoscalerInlinePassword = "autoscaler-inline-password", Audit, Error,
        "a Redis password written in the autoscaler's trigger: anyone who reads the object reads it",
        "give the password through a TriggerAuthentication with secretTargetRef (the Secret the workers read QUEUE_BULL_REDIS_PASSWORD from)";
    AutoscalerWithoutRedisAuth = "autoscaler-without-redis-auth", Audit, Error,
        "the workers read Redis with a password, but the autoscaler's trigger gives none: KEDA cannot read the lists and never scales",
        "set the trigger's authenticationRef to a TriggerAuthentication whose secretTargetRef gives parameter password from the Secret the workers read QUEUE_BULL_REDIS_PASSWORD from";
    AutoscalerTargetFar = "autoscaler-target-far", Audit, Warning,
        "the workers' autoscaler's target per replica is far from what one worker holds at the measured operating point",
        "set the target per replica to 2/3 × one worker's measured ceiling × the job time (n8ncap recommend RUN --format keda writes it)";
    AutoscalerMaxBeyondSharedBound = "autoscaler-max-beyond-shared-bound", Audit, Warning,
        "the workers' autoscaler may add replicas past the shared bound the run measured: they add nothing",
        "set maxReplicaCount (maxReplicas) at the workers the shared bound allows, or raise that bound first (webhook processors for main's intake, a bigger node for the host)";
    GracePeriodTooShort = "grace-period-too-short", Audit, Warning,
        "terminationGracePeriodSeconds shorter than n8n's (and the runners') graceful shutdown",
        "set terminationGracePeriodSeconds above N8N_GRACEFUL_SHUTDOWN_TIMEOUT (and the runners')";
    WorkerProbeWithoutHealthCheck = "worker-probe-without-health-check", Audit, Error,
        "HTTP probes on a worker without QUEUE_HEALTH_CHECK_ACTIVE=true",
        "set QUEUE_HEALTH_CHECK_ACTIVE=true on the worker";
    ReadinessOnHealthz = "readiness-on-healthz", Audit, Warning,
        "readiness probe on /healthz instead of /healthz/readiness",
        "probe readiness on /healthz/readiness";
    HeapAboveMemoryLimit = "heap-above-memory-limit", Audit, Warning,
        "--max-old-space-size in NODE_OPTIONS at or above the container's memory limit",
        "set --max-old-space-size below the memory limit (about 3/4 of it)";
    WorkerWithoutMemoryLimit = "worker-without-memory-limit", Audit, Warning,
        "a worker container without a memory limit",
        "set a memory limit on every worker";
    RunnerMemoryPerTask = "runner-memory-per-task", Audit, Warning,
        "a runner's memory limit leaves little room per task beyond an idle runner",
        "raise the runner's memory limit or lower N8N_RUNNERS_MAX_CONCURRENCY";
    RegularMode = "regular-mode", Audit, Info,
        "regular mode: main runs every execution, capped by N8N_CONCURRENCY_PRODUCTION_LIMIT and one core",
        "";
    BinaryDataFilesystemInQueueMode = "binary-data-filesystem-in-queue-mode", Audit, Error,
        "N8N_DEFAULT_BINARY_DATA_MODE=filesystem in queue mode, which n8n does not support",
        "set N8N_DEFAULT_BINARY_DATA_MODE to s3 or database";
    ContainerLastOomKilled = "container-last-oom-killed", Live, Error,
        "a live container's last exit was an OOM kill (its memory limit was reached)",
        "raise its memory limit (n8ncap recommend's memory plan gives the figure for runners)";
    ContainerRestartCount = "container-restart-count", Live, Warning,
        "a live container has restarted (RestartCount > 0)",
        "find why it restarted (docker logs, docker inspect State)";
}

impl FindingId {
    pub fn entry(self) -> &'static Entry {
        &Self::TABLE[self as usize]
    }

    /// The id as written (`runner-limit-caps`).
    pub fn as_str(self) -> &'static str {
        self.entry().id
    }

    pub fn severity(self) -> Severity {
        self.entry().severity
    }

    pub fn summary(self) -> &'static str {
        self.entry().summary
    }

    /// What to change in general; `None` for findings that only inform.
    pub fn fix(self) -> Option<&'static str> {
        Some(self.entry().fix).filter(|f| !f.is_empty())
    }

    pub fn scope(self) -> Scope {
        self.entry().scope
    }

    /// Whether the audit can report it.
    pub fn in_audit(self) -> bool {
        matches!(
            self.scope(),
            Scope::Audit | Scope::Live | Scope::Both | Scope::Upgrade
        )
    }

    /// Whether a run's diagnosis can report it.
    pub fn in_run(self) -> bool {
        matches!(self.scope(), Scope::Run | Scope::Both)
    }

    /// Rules only running containers can break (their state: OOM kills, restarts).
    pub fn live_only(self) -> bool {
        self.scope() == Scope::Live
    }

    /// The audit's rules, in the table's order (SARIF's rule list).
    pub fn audit_rules() -> impl Iterator<Item = FindingId> {
        Self::ALL.iter().copied().filter(|f| f.in_audit())
    }

    /// Position among the audit's rules (SARIF's ruleIndex); `None` for a run's finding.
    pub fn audit_index(self) -> Option<usize> {
        Self::audit_rules().position(|r| r == self)
    }

    pub fn parse(id: &str) -> Option<FindingId> {
        Self::ALL.iter().copied().find(|f| f.as_str() == id)
    }
}

impl std::fmt::Display for FindingId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for FindingId {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for FindingId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_the_enum_and_serde_writes_its_spelling() {
        let mut seen = std::collections::BTreeSet::new();
        for (i, id) in FindingId::ALL.iter().enumerate() {
            assert_eq!(*id as usize, i);
            assert!(seen.insert(id.as_str()), "{id} twice");
            assert!(id
                .as_str()
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'-'));
            let json = serde_json::to_string(id).unwrap();
            assert_eq!(json, format!("\"{}\"", id.as_str()));
            assert_eq!(serde_json::from_str::<FindingId>(&json).unwrap(), *id);
            assert_eq!(FindingId::parse(id.as_str()), Some(*id));
            assert!(!id.summary().is_empty());
        }
        assert_eq!(FindingId::audit_rules().count(), 59);
        let upgrade = FindingId::ALL
            .iter()
            .filter(|f| f.scope() == Scope::Upgrade);
        assert_eq!(upgrade.count(), 4);
        assert!(
            FindingId::WorkerWithoutRunner.in_run() && FindingId::WorkerWithoutRunner.in_audit()
        );
        let live: Vec<_> = FindingId::ALL.iter().filter(|f| f.live_only()).collect();
        assert_eq!(live.len(), 4);
        assert_eq!(FindingId::RunnerLimitCaps.audit_index(), None);
    }

    /// The reference's lists: the **Findings** paragraph of `docs/diagnose.md` (a run's ids) and
    /// the rule tables of `docs/audit.md` (`| id | severity | what |`), each equal to the table,
    /// severities included.
    #[test]
    fn the_reference_lists_every_id_and_no_other() {
        use std::collections::BTreeSet;
        let diagnose = include_str!("../../docs/diagnose.md");
        let rules = include_str!("../../docs/audit.md");
        let kebab =
            |w: &str| w.contains('-') && w.bytes().all(|b| b.is_ascii_lowercase() || b == b'-');
        let ticked = |text: &str| -> Vec<String> {
            text.split('`')
                .skip(1)
                .step_by(2)
                .filter(|w| kebab(w))
                .map(str::to_string)
                .collect()
        };
        let start = diagnose
            .find("- **Findings**")
            .expect("docs/diagnose.md's Findings paragraph");
        let para = &diagnose[start..];
        let para = &para[..para[2..].find("\n- ").map_or(para.len(), |e| e + 2)];
        let run: BTreeSet<String> = ticked(para).into_iter().collect();
        let want: BTreeSet<String> = FindingId::ALL
            .iter()
            .filter(|f| f.in_run())
            .map(|f| f.as_str().to_string())
            .collect();
        assert_eq!(
            run, want,
            "docs/diagnose.md's Findings paragraph vs the registry"
        );

        let mut audit = BTreeSet::new();
        for line in rules.lines() {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if cells.len() != 5 || !["error", "warning", "info"].contains(&cells[2]) {
                continue;
            }
            for id in ticked(cells[1]) {
                let f = FindingId::parse(&id)
                    .unwrap_or_else(|| panic!("docs/audit.md's rule {id} is not in the registry"));
                assert!(f.in_audit(), "{id} is no audit rule");
                assert_eq!(f.severity().word(), cells[2], "{id}'s severity");
                audit.insert(id);
            }
        }
        let want: BTreeSet<String> = FindingId::audit_rules()
            .map(|f| f.as_str().to_string())
            .collect();
        assert_eq!(audit, want, "docs/audit.md's rule tables vs the registry");
    }
}
