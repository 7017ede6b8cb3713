#!/usr/bin/env bash
# Soak: a long closed sweep against the simulator with n8ncap's RSS sampled every 5 s. Prints
# the samples, then the RSS slope after the warm-up (least squares, KiB per minute) and the
# peak: memory must stay flat while the load runs. On demand, not in CI.
#
# Usage: benches/soak.sh [MINUTES] [VUS]   (default 20 minutes, 64 virtual users; the first
#        quarter of the run, at most 2 minutes, is warm-up and not in the slope)
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-20}
VUS=${2:-64}
cargo build --release -q --bin n8ncap
BIN=$PWD/target/release/n8ncap
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
PORT=$((20000 + RANDOM % 10000))
# Main's intake costs nothing (n8n's 27 ms by default would cap the soak near 37/s).
N8N_PORT=$PORT "$BIN" sim all --concurrency 200 --runner-limit 200 --main-cpu-ms 0 >"$tmp/sim.log" 2>&1 &
sleep 1
"$BIN" sweep --profile steady --url "http://127.0.0.1:$PORT/webhook/load" \
  --body '{"sleep_ms":20}' --vus "$VUS" --stage-duration "${MINUTES}m" --warmup 5s \
  --metrics "main=http://127.0.0.1:$PORT/metrics" --out "$tmp/out" --json >"$tmp/summary.json" \
  2>"$tmp/sweep.err" &
SWEEP=$!
start=$(date +%s)
echo "seconds rss_kib"
while kill -0 "$SWEEP" 2>/dev/null; do
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$SWEEP/status" 2>/dev/null || true)
  [ -n "$rss" ] && echo "$(( $(date +%s) - start )) $rss" | tee -a "$tmp/rss"
  sleep 5
done
wait "$SWEEP" || true
python3 - "$tmp/rss" "$MINUTES" "$tmp/summary.json" <<'PY'
import json, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
warm = min(120.0, float(sys.argv[2]) * 60 / 4)
pts = [(t, r) for t, r in rows if t >= warm]
n = len(pts)
if n < 3:
    sys.exit("too few samples after the warm-up")
mt = sum(t for t, _ in pts) / n
mr = sum(r for _, r in pts) / n
slope = sum((t - mt) * (r - mr) for t, r in pts) / sum((t - mt) ** 2 for t, _ in pts)
s = json.load(open(sys.argv[3]))
st = s["stages"][0]
print(f"requests: {st['requests']} ({st['throughput_rps']:.0f} req/s), valid: {st['valid']}")
print(f"RSS after warm-up: mean {mr/1024:.1f} MiB, peak {max(r for _, r in rows)/1024:.1f} MiB, "
      f"slope {slope*60:.1f} KiB/min over {pts[-1][0]-pts[0][0]:.0f} s "
      f"({slope*60*60/1024:.2f} MiB/hour)")
PY
