#!/usr/bin/env bash
# Behaviour unchanged? Two builds of n8ncap on every deterministic input the repository holds:
# `diagnose` (text and JSON) and `recommend` (text and each dialect) of every saved run in
# examples/, `scale` and `compare` of the examples, the real k6 summary capture, and `audit`
# (text and JSON) of every compose and Kubernetes fixture and example. Each output (stdout,
# stderr, exit code) is kept under OUT/old and OUT/new; the differences are printed and counted.
#
# Usage: benches/outputs.sh OLD_BIN NEW_BIN [OUT]
#   e.g. git worktree add /tmp/old REV && (cd /tmp/old && cargo build) &&
#        benches/outputs.sh /tmp/old/target/debug/n8ncap target/debug/n8ncap
set -uo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?old binary}; NEW=${2:?new binary}; OUT=${3:-$(mktemp -d)}
# The compose examples interpolate these; their values are never shown by audit.
export POSTGRES_PASSWORD=not-a-secret ENCRYPTION_KEY=not-a-secret
outputs() {
  local bin=$1 out=$2 n=0
  rm -rf "$out"; mkdir -p "$out"
  run() {
    local name=$1; shift; n=$((n + 1))
    "$bin" "$@" >"$out/$name.out" 2>"$out/$name.err"
    echo "exit $?" >>"$out/$name.out"
  }
  for d in examples/runs/* examples/scale/w*; do
    t=$(echo "$d" | tr / _)
    run "diagnose_$t" diagnose "$d"
    run "diagnose-json_$t" diagnose "$d" --format json
    run "recommend_$t" recommend "$d"
    for dl in compose helm-official helm-community k8s; do
      run "recommend-${dl}_$t" recommend "$d" --format "$dl"
    done
  done
  # What is sized from a run's operating point: autoscalers, alerts, the time budget, the
  # dashboard's lines, and a replay of the generated autoscaler.
  for d in examples/runs/*; do
    t=$(echo "$d" | tr / _)
    for m in fixtures/k8s/rendered/official-keda-autoscaling.yaml fixtures/k8s/rendered/community-queue-external.yaml; do
      u=$(basename "$m" .yaml)
      run "keda_${t}_$u" recommend "$d" --format keda -f "$m"
      run "hpa_${t}_$u" recommend "$d" --format hpa -f "$m"
      run "audit-run_${t}_$u" audit -f "$m" --run "$d"
    done
    run "rules_$t" recommend "$d" --format prometheus-rules
    run "grafana_$t" grafana --run "$d"
  done
  run scale scale examples/scale/w1 examples/scale/w2 examples/scale/w4 examples/scale/w8
  run scale-json scale examples/scale/w1 examples/scale/w2 examples/scale/w4 examples/scale/w8 --format json
  run compare compare examples/runs/before examples/runs/after
  run compare-json compare examples/runs/before examples/runs/after --format json
  run k6-summary diagnose --k6-summary fixtures/n8n-real/rc20_wc15_cpu.k6-summary.json
  run k6-summary-json diagnose --k6-summary fixtures/n8n-real/rc20_wc15_cpu.k6-summary.json --format json
  for f in $(find fixtures/compose fixtures/k8s examples/compose \( -name '*.yml' -o -name '*.yaml' \) | sort); do
    t=$(echo "$f" | tr / _)
    run "audit_$t" audit -f "$f"
    run "audit-json_$t" audit -f "$f" --format json
  done
  echo "$n"
}
runs=$(outputs "$OLD" "$OUT/old")
outputs "$NEW" "$OUT/new" >/dev/null
differ=$(diff -rq "$OUT/old" "$OUT/new" | wc -l)
diff -r "$OUT/old" "$OUT/new"
echo "$runs runs each; $differ output file(s) differ (kept in $OUT)"
