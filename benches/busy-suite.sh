#!/usr/bin/env bash
# A tier of the test suite beside a CPU hog on every core, N times (CONVENTIONS: tests must pass on a
# busy shared machine every time). Prints one line per run: its exit code, the passed and failed
# counts of each test binary, its wall time and the failed tests (a failed run's whole log is kept
# as $TMPDIR/busy-suite-run-N.log); exits non-zero when any run failed.
#
# Usage: benches/busy-suite.sh [RUNS] [TIER]   (default 3 runs of the fast tier, `cargo test`;
#        TIER stack: the stack tier, the README's `-- --ignored --skip in_real_time`; builds
#        first, so the runs time the tests)
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
case "${2:-fast}" in
  fast) tier=(cargo test --no-fail-fast) ;;
  stack) tier=(cargo test --test integration --no-fail-fast -- --ignored --skip in_real_time) ;;
  *) echo "TIER is fast or stack" >&2; exit 2 ;;
esac
command -v stress-ng >/dev/null || { apt-get update -qq && apt-get install -y -qq stress-ng; }
CI=true cargo test --no-run -q 2>/dev/null
failed=0
for i in $(seq "$RUNS"); do
  stress-ng --cpu 0 --timeout 3600s >/dev/null 2>&1 &
  hog=$!
  start=$(date +%s)
  log=$(mktemp)
  CI=true "${tier[@]}" >"$log" 2>&1
  rc=$?
  kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null
  counts=$(grep -E '^test result:' "$log" | sed -E 's/.*ok\. |.*FAILED\. //; s/; [0-9]+ ignored.*//' | paste -sd' ' -)
  echo "run $i/$RUNS: exit $rc, $counts, $(( $(date +%s) - start )) s"
  grep -E '^    [a-z0-9_:]+$' "$log" | sed 's/^/    failed: /'
  [ "$rc" -eq 0 ] || cp "$log" "${TMPDIR:-/tmp}/busy-suite-run-$i.log"
  [ "$rc" -eq 0 ] || failed=1
  rm -f "$log"
done
exit $failed
