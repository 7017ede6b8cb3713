#!/usr/bin/env bash
# Where the integration tests' time goes (issue #63: a cold `cargo test` beside a hog in 8
# minutes). Runs the integration binary once, each line of libtest's output stamped with the
# seconds since the start, then reconstructs each test's duration: libtest starts the tests in
# name order, THREADS at a time, each as a slot frees, so the k-th test starts when the
# (k − THREADS)-th completion was printed. Prints the wall time, the sum of the durations (the
# wall time can be no less than that ÷ THREADS), the longest tests with their start and end,
# and each module's sum. The stamped log is kept in OUT.
#
# Usage: benches/test-profile.sh [THREADS] [OUT]   (default 5, as .cargo/config.toml sets;
#        OUT default $TMPDIR/test-profile.log). Set CI=1 to fail, not skip, without a dependency.
set -uo pipefail
cd "$(dirname "$0")/.."
THREADS=${1:-5}
OUT=${2:-${TMPDIR:-/tmp}/test-profile.log}
bin=$(cargo test --no-run --test integration 2>&1 | grep -o 'target/debug/deps/integration-[0-9a-f]*' | tail -1)
[ -x "$bin" ] || { echo "no integration test binary was built" >&2; exit 1; }
RUST_TEST_THREADS=$THREADS RUST_BACKTRACE=0 "$bin" 2>&1 |
  perl -MTime::HiRes=time -ne 'BEGIN { $| = 1; $t0 = time } printf("%.1f %s", time - $t0, $_)' >"$OUT"
python3 - "$OUT" "$bin" "$THREADS" <<'EOF'
import re, subprocess, sys
log, binary, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
def listed(*extra):
    out = subprocess.run([binary, "--list", *extra], capture_output=True, text=True).stdout
    return [l[: -len(": test")] for l in out.splitlines() if l.endswith(": test")]
ignored = set(listed("--ignored"))
order = [n for n in sorted(listed()) if n not in ignored]
done = {}
for line in open(log):
    m = re.match(r"([\d.]+) test (\S+) \.\.\. (ok|FAILED)", line)
    if m:
        done[m.group(2)] = float(m.group(1))
ends = sorted(done.values())
rows = []
for k, name in enumerate(order):
    if name not in done:
        continue
    start = 0.0 if k < threads else ends[k - threads]
    rows.append((done[name] - start, start, done[name], name))
rows.sort(reverse=True)
total = sum(r[0] for r in rows)
print(f"{len(rows)} tests, wall {max(ends, default=0):.0f} s, durations {total:.0f} s "
      f"(≥ {total / threads:.0f} s at {threads} at a time)")
for d, s, e, n in rows[:25]:
    print(f"{d:7.1f} s  {s:6.1f} → {e:6.1f}  {n}")
mods = {}
for d, _, _, n in rows:
    mods[n.split("::")[0]] = mods.get(n.split("::")[0], 0.0) + d
print("by module: " + ", ".join(f"{m} {s:.0f} s" for m, s in sorted(mods.items(), key=lambda x: -x[1])[:12]))
EOF
