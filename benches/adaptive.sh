#!/usr/bin/env bash
# Adaptive sweep against breakpoint-style fixed sweeps, in the same run, on simulated stacks whose
# limits the runs are not told (no --worker-concurrency / --runner-limit): the runner limit caps,
# worker concurrency caps, the worker's CPU caps, and two-phase jobs (external wait + Code).
# Each stack runs as separate processes (sim main, sim worker, sim runner) so the worker's CPU
# is its own. Prints a table: wall time, verdict, inferred limits and knee of each, the true knee
# of the stack, and the time ratio. Goal (issue 15): same verdicts and limits, adaptive knee
# within ±10 % of the true knee, in ≤ 1/3 of the fixed sweep's time.
#
# Usage: [ONLY=stack] benches/adaptive.sh [STAGE_SECONDS]   (fixed sweep: 15, 30, 50, 80, 120 in flight,
#        default 60 s stages with 15 s warm-up, as profiles/breakpoint.yaml; ~25 min in all)
set -euo pipefail
cd "$(dirname "$0")/.."
STAGE=${1:-60}
WARM=$(( STAGE / 4 ))
cargo build --release -q --bin n8ncap
BIN=$PWD/target/release/n8ncap
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

# name | worker --concurrency | runner limit | worker CPU ms | body | true knee (in flight)
# True knee = X_max × S: S = job + 40 ms overhead (+ CPU), X_max = the smallest ceiling.
STACKS=(
  "runner-caps|60|20|0|{\"sleep_ms\":1000}|21"
  "worker-caps|40|60|0|{\"sleep_ms\":1000}|41"
  "cpu-caps|100|100|20|{\"sleep_ms\":1000}|53"
  "two-phase|80|20|0|{\"wait_ms\":500,\"sleep_ms\":500}|42"
)

# Main's intake costs nothing here (the simulator's default is n8n's 27 ms): the worker's limits
# are what each stack's search must find.
start_stack() { # concurrency runner-limit cpu-ms port-base
  local c=$1 r=$2 cpu=$3 p=$4
  N8N_PORT=$p QUEUE_BULL_REDIS_PORT=$((p+1)) N8N_METRICS=true N8N_METRICS_INCLUDE_QUEUE_METRICS=true \
    N8N_METRICS_QUEUE_METRICS_INTERVAL=1 "$BIN" sim main --cpu-ms 0 >"$tmp/main.log" 2>&1 &
  sleep 0.5
  QUEUE_BULL_REDIS_HOST=127.0.0.1 QUEUE_BULL_REDIS_PORT=$((p+1)) QUEUE_HEALTH_CHECK_PORT=$((p+2)) \
    N8N_RUNNERS_MODE=external N8N_RUNNERS_BROKER_PORT=$((p+3)) N8N_METRICS=true \
    "$BIN" sim worker --concurrency "$c" --cpu-ms "$cpu" >"$tmp/worker.log" 2>&1 &
  sleep 0.5
  N8N_RUNNERS_TASK_BROKER_URI=http://127.0.0.1:$((p+3)) N8N_RUNNERS_MAX_CONCURRENCY=$r \
    "$BIN" sim runner >"$tmp/runner.log" 2>&1 &
  sleep 1
}

stop_stack() { kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; }

# Reads a summary.json: verdict, inferred limits, knee.
describe() {
  python3 - "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
d = s.get("diagnosis") or {}
st = d.get("settings") or {}
def lim(k):
    v = st.get(k)
    return "?" if not v else f"{v['value']}"
knee = "-"
for step in reversed(s.get("search") or []):
    if step.get("in_flight") is None and step["why"].startswith("knee located"):
        knee = step["why"].split()[2]
        break
else:
    k = d.get("knee")
    if k:
        knee = f"{k['in_flight']:.0f} (≤{k['level'].get('in_flight', '?')})"
print(f"{d.get('capping_limit')}|c={lim('worker_concurrency')} r={lim('runner_limit')}|{knee}")
PY
}

printf '| stack | true knee | fixed: time | verdict | limits | knee | adaptive: time | verdict | limits | knee | time ratio |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
port=21000
for s in "${STACKS[@]}"; do
  IFS='|' read -r name c r cpu body truek <<<"$s"
  # ONLY=name runs one stack.
  if [ -n "${ONLY:-}" ] && [ "$ONLY" != "$name" ]; then continue; fi
  port=$((port + 10))
  common=(--url "http://127.0.0.1:$port/webhook/load" --body "$body" --timeout 300s
          --metrics "main=http://127.0.0.1:$port/metrics" --metrics "worker=http://127.0.0.1:$((port+2))/metrics"
          --queue-metrics-interval 1 --json)
  start_stack "$c" "$r" "$cpu" "$port"
  t0=$(date +%s.%N)
  "$BIN" sweep --profile breakpoint --stage-duration "${STAGE}s" --warmup "${WARM}s" \
    "${common[@]}" --out "$tmp/$name-fixed" >/dev/null 2>"$tmp/$name-fixed.err" || true
  t1=$(date +%s.%N)
  stop_stack
  port=$((port + 5))
  common[1]="http://127.0.0.1:$port/webhook/load"
  common[7]="main=http://127.0.0.1:$port/metrics"
  common[9]="worker=http://127.0.0.1:$((port+2))/metrics"
  start_stack "$c" "$r" "$cpu" "$port"
  t2=$(date +%s.%N)
  "$BIN" sweep --adaptive --max-vus 120 --budget 10m --max-stage "${STAGE}s" \
    "${common[@]}" --out "$tmp/$name-adaptive" >/dev/null 2>"$tmp/$name-adaptive.err" || true
  t3=$(date +%s.%N)
  stop_stack
  fixed=$(describe "$tmp/$name-fixed/summary.json")
  adaptive=$(describe "$tmp/$name-adaptive/summary.json")
  tf=$(python3 -c "print(f'{$t1-$t0:.0f} s')")
  ta=$(python3 -c "print(f'{$t3-$t2:.0f} s')")
  ratio=$(python3 -c "print(f'{($t3-$t2)/($t1-$t0):.2f}')")
  IFS='|' read -r fv fl fk <<<"$fixed"
  IFS='|' read -r av al ak <<<"$adaptive"
  printf '| %s (c=%s r=%s cpu=%sms) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
    "$name" "$c" "$r" "$cpu" "$truek" "$tf" "$fv" "$fl" "$fk" "$ta" "$av" "$al" "$ak" "$ratio"
done
