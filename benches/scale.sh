#!/usr/bin/env bash
# Scale sweep against single adaptive searches, in the same run (issue 48): `sweep --adaptive
# --workers 1,2,4,8 --scale-cmd` on the simulator's processes (main at 25 ms of CPU per request,
# worker/runner pairs of 5 slots and runner limit 5, 1 s jobs: 5/s a worker until main's core
# near 40/s), against the same adaptive search run once per count after scaling by hand. Goal:
# the scale sweep takes no longer than the four searches (its scaling and settle included), and
# finds the same ceilings. Prints one line per count and the times.
#
# Usage: benches/scale.sh [COUNTS]   (default 1,2,4,8; about 15 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
COUNTS=${1:-1,2,4,8}
cargo build --release -q --bin n8ncap
export BIN=$PWD/target/release/n8ncap
export STATE=$(mktemp -d)
tmp=$STATE
cleanup() {
  for f in "$STATE"/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  kill $(jobs -p) 2>/dev/null || true
  rm -rf "$STATE"
}
trap cleanup EXIT
cat > "$tmp/scale.sh" <<'SH'
#!/usr/bin/env bash
set -u
N=$1
[ "$N" = "${FAIL_AT:-none}" ] && { echo "quota exceeded for $N workers" >&2; exit 3; }
read -r -a HEALTH <<< "$HEALTH_PORTS"
read -r -a BROKER <<< "$BROKER_PORTS"
for i in $(seq 1 ${#HEALTH[@]}); do
  h=${HEALTH[$((i-1))]}; b=${BROKER[$((i-1))]}
  if [ "$i" -le "$N" ]; then
    if ! kill -0 "$(cat "$STATE/w$i.pid" 2>/dev/null)" 2>/dev/null; then
      env -i PATH="$PATH" QUEUE_BULL_REDIS_HOST=127.0.0.1 QUEUE_BULL_REDIS_PORT="$QUEUE" \
        QUEUE_HEALTH_CHECK_PORT="$h" N8N_WORKER_SERVER_ADDRESS=127.0.0.1 \
        N8N_RUNNERS_MODE=external N8N_RUNNERS_BROKER_PORT="$b" \
        N8N_RUNNERS_BROKER_LISTEN_ADDRESS=127.0.0.1 N8N_RUNNERS_AUTH_TOKEN=t N8N_METRICS=true \
        ${WORKER_ENV:-} setsid "$BIN" sim worker --concurrency ${CONCURRENCY:-2} >"$STATE/w$i.log" 2>&1 < /dev/null &
      echo $! > "$STATE/w$i.pid"
      env -i PATH="$PATH" N8N_RUNNERS_TASK_BROKER_URI="http://127.0.0.1:$b" \
        N8N_RUNNERS_MAX_CONCURRENCY=5 N8N_RUNNERS_AUTH_TOKEN=t \
        setsid "$BIN" sim runner >"$STATE/r$i.log" 2>&1 < /dev/null &
      echo $! > "$STATE/r$i.pid"
      for _ in $(seq 1 2400); do
        curl -sf "http://127.0.0.1:$h/sim/runners" | grep -q '"runners":\[{' && break
        sleep 0.05
      done
      echo "worker $i up"
    fi
  else
    for f in "$STATE/w$i.pid" "$STATE/r$i.pid"; do
      if [ -f "$f" ]; then kill "$(cat "$f")" 2>/dev/null; rm -f "$f"; fi
    done
  fi
done
SH
P=21500
export QUEUE=$((P+1)) CONCURRENCY=5
export HEALTH_PORTS="$((P+10)) $((P+11)) $((P+12)) $((P+13)) $((P+14)) $((P+15)) $((P+16)) $((P+17))"
export BROKER_PORTS="$((P+20)) $((P+21)) $((P+22)) $((P+23)) $((P+24)) $((P+25)) $((P+26)) $((P+27))"
N8N_PORT=$P N8N_LISTEN_ADDRESS=127.0.0.1 QUEUE_BULL_REDIS_PORT=$QUEUE N8N_METRICS=true \
  N8N_METRICS_INCLUDE_QUEUE_METRICS=true N8N_METRICS_QUEUE_METRICS_INTERVAL=1 \
  "$BIN" sim main --cpu-ms 25 >"$tmp/main.log" 2>&1 &
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$P/healthz" >/dev/null && break; sleep 0.1; done
bash "$tmp/scale.sh" 1 >/dev/null
SWEEP=(sweep --url "http://127.0.0.1:$P/webhook/load" --adaptive --body '{"sleep_ms":1000}'
  --metrics "main=http://127.0.0.1:$P/metrics" --queue-metrics-interval 1 --json)
t0=$(date +%s.%N)
"$BIN" "${SWEEP[@]}" --workers "$COUNTS" --scale-cmd "bash $tmp/scale.sh {workers}" \
  --restore-workers 1 --scale-settle 2s --out "$tmp/scale-run" >"$tmp/scale.json" 2>"$tmp/scale.err" || true
t1=$(date +%s.%N)
singles=0
for n in ${COUNTS//,/ }; do
  bash "$tmp/scale.sh" "$n" >/dev/null
  s0=$(date +%s.%N)
  "$BIN" "${SWEEP[@]}" --workers "$n" --out "$tmp/single-$n" >"$tmp/single-$n.json" 2>/dev/null || true
  s1=$(date +%s.%N)
  singles=$(python3 -c "print($singles + $s1 - $s0)")
done
bash "$tmp/scale.sh" 1 >/dev/null
python3 - "$tmp" "$COUNTS" "$(python3 -c "print($t1 - $t0)")" "$singles" <<'EOF'
import json, sys
tmp, counts, t_scale, t_single = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
v = json.load(open(f"{tmp}/scale.json"))
pts = {p["workers"]: p["ceiling"] for p in v["scaling"]["points"]}
for n in map(int, counts.split(",")):
    d = json.load(open(f"{tmp}/single-{n}.json"))["diagnosis"]
    c = (d.get("measured_ceiling") or {}).get("mean")
    s = pts.get(n)
    print(f"{n} workers: scale sweep {s[0] if s else float('nan'):.1f}/s, single search {c or float('nan'):.1f}/s")
reached = [l["kind"] for l in v["scaling"]["shared"] if l["reached"]]
print(f"scale sweep {t_scale:.0f} s (scaling and settle included), {len(counts.split(','))} single searches {t_single:.0f} s"
      f" → ×{t_scale / t_single:.2f}; shared limit reached: {', '.join(reached) or 'none'}")
EOF
