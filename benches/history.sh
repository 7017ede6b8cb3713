#!/usr/bin/env bash
# History benchmark (issues #23, #48): `n8ncap diagnose --prometheus` over 7 days at a 15 s step
# for 50 workers (main's queue gauges and counters, execution durations, CPU of main and of
# each worker: 57 series × 40 320 steps), against promtool fetching the same series from the
# same Prometheus in the same run; then `n8ncap scale --prometheus` reading the worker counts of
# the same range. Prints one line: seconds and peak RSS of each, the ratios, the verdict and
# the counts found.
#
# The range is synthetic (generated here, backfilled with `promtool tsdb create-blocks-from
# openmetrics`): a daily peak where 10-slot workers are capped by 5-task runners; half the
# workers run the first half of the range, all of them the second (a deploy that added
# workers). UP=1 adds `up` of every target (the counts are then read from the targets).
#
# A month (30 days at 15 s: 172 800 steps per series) is read in parts of 40 320 steps.
#
# Usage: benches/history.sh [WORKERS] [DAYS]   (default 50 7). Production's size, 200 series
# for 30 days: `benches/history.sh 193 30`, or `UP=1 benches/history.sh 96 30` (96 workers'
# CPU and `up`). BENCH_TSDB=DIR keeps the generated TSDB there and reuses it on the next run
# with the same WORKERS, DAYS and UP (generating a month takes minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
WORKERS=${1:-50}
DAYS=${2:-7}
STEP=15
PORT=19190
command -v prometheus >/dev/null || { apt-get update -qq && apt-get install -y -qq prometheus; }
cargo build --release -q --bin n8ncap
BIN=target/release/n8ncap
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
UP=${UP:-0}
DB=${BENCH_TSDB:-$tmp/db}
if [ -f "$DB/range" ] && [ "$(cut -d' ' -f1,2,3 "$DB/range")" = "$WORKERS $DAYS $UP" ]; then
  read -r _ _ _ START END < "$DB/range"
else
rm -rf "$DB"; mkdir -p "$DB"
END=$(( $(date +%s) / 3600 * 3600 - 3600 ))
START=$(( END - DAYS * 86400 ))

mkdir -p "$tmp/om"
python3 - "$START" "$END" "$STEP" "$WORKERS" "$tmp/om" "$UP" <<'EOF'
import math, sys
start, end, step, workers, up = (int(a) for a in (sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[6]))
outdir = sys.argv[5]
# The first half of the range runs half the workers, the second half all of them (a deploy
# that added workers): each worker's series exist while it runs.
def running(t):
    return (workers + 1) // 2 if t < (start + end) // 2 else workers
def cap(t):
    return running(t) * 5 / 0.5  # runner-bound ceiling: 5 tasks of 0.5 s per worker
def load(t):
    # requests/s offered: a quiet base and a daily two-hour peak 4 % above the runners' ceiling
    h = (t % 86400) / 3600
    return 0.06 * cap(t) + (1.04 * cap(t) if 13 <= h < 15 else 0) * (1 + 0.05 * math.sin(t / 600))
# main's CPU per execution: a third of its core at the highest ceiling (its intake never caps)
main_cpu = 0.33 / (workers * 10)
done = fail = dsum = dcnt = mcpu = waiting = 0.0
wcpu = [0.0] * workers
main = 'job="n8n",instance="n8n-main:5678"'
names = ["n8n_scaling_mode_queue_jobs_active", "n8n_scaling_mode_queue_jobs_waiting",
         "n8n_scaling_mode_queue_jobs_completed", "n8n_scaling_mode_queue_jobs_failed",
         "n8n_workflow_execution_duration_seconds_sum", "n8n_workflow_execution_duration_seconds_count",
         "n8n_process_cpu_seconds_total"]
def worker(w):
    return f'job="n8n-worker",instance="n8n-worker-{w}:5678"'
# One file per day: promtool backfills each into its own blocks, the days in parallel.
day0 = start
while day0 < end:
    day1 = min(day0 + 86400, end)
    rows = {n: [] for n in names}
    wrows = [[] for _ in range(workers)]
    uprows = [[] for _ in range(workers + 1)]
    for t in range(day0, day1, step):
        c, n_up = cap(t), running(t)
        x_in = load(t)
        x = min(x_in, c)
        waiting = max(0.0, waiting + (x_in - x) * step) if x_in > c else max(0.0, waiting - (c - x) * step)
        done += x * step
        dsum += x * step * (0.52 if x < c else 1.0)
        dcnt += x * step
        mcpu += main_cpu * x * step
        active = min(n_up * 10, x * (0.52 if x < c else 1.0))
        for n, v in zip(names, [active, waiting, done, fail, dsum, dcnt, mcpu]):
            rows[n].append(f"{n}{{{main}}} {v:.3f} {t}\n")
        for w in range(n_up):
            wcpu[w] += 0.02 * x / n_up * step
            wrows[w].append(f"n8n_process_cpu_seconds_total{{{worker(w)}}} {wcpu[w]:.3f} {t}\n")
        if up:
            uprows[0].append(f"up{{{main}}} 1 {t}\n")
            for w in range(n_up):
                uprows[w + 1].append(f"up{{{worker(w)}}} 1 {t}\n")
    with open(f"{outdir}/{day0}.om", "w") as out:
        for n in names:
            out.write(f"# TYPE {n} unknown\n")
            out.writelines(rows[n])
            if n == "n8n_process_cpu_seconds_total":
                for w in wrows:
                    out.writelines(w)
        if up:
            out.write("# TYPE up unknown\n")
            for r in uprows:
                out.writelines(r)
        out.write("# EOF\n")
    day0 = day1
EOF
# A day's file becomes one block (not twelve of 2 h), so Prometheus has no compaction to do
# while it answers.
ls "$tmp"/om/*.om | xargs -P "$(nproc)" -I{} promtool tsdb create-blocks-from openmetrics \
  --max-block-duration=24h {} "$DB/tsdb" >/dev/null
rm -rf "$tmp/om"
echo "$WORKERS $DAYS $UP $START $END" > "$DB/range"
fi
printf 'global: {scrape_interval: 15s}\nscrape_configs: []\n' > "$tmp/prom.yml"
prometheus --config.file="$tmp/prom.yml" --storage.tsdb.path="$DB/tsdb" \
  --storage.tsdb.retention.time=60d --storage.tsdb.max-block-duration=24h --web.listen-address=127.0.0.1:$PORT >/dev/null 2>&1 &
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$PORT/-/ready" >/dev/null && break; sleep 0.1; done
URL="http://127.0.0.1:$PORT"

# Peak RSS (KiB) and wall seconds of a command, from GNU time.
timed() { /usr/bin/time -f "%e %M" -o "$tmp/t" "$@" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }; cat "$tmp/t"; }

read -r n_s n_kb < <(timed $BIN diagnose --prometheus "$URL" --start "$START" --end "$END" --step ${STEP}s --json)
# The reference: promtool reading the same seven series at the same step (no judging at all).
ref() {
  for q in n8n_scaling_mode_queue_jobs_active n8n_scaling_mode_queue_jobs_waiting \
    n8n_scaling_mode_queue_jobs_completed n8n_scaling_mode_queue_jobs_failed \
    n8n_process_cpu_seconds_total n8n_workflow_execution_duration_seconds_sum \
    n8n_workflow_execution_duration_seconds_count $([ "$UP" = 1 ] && echo up); do
    # promtool asks for one query at a time and Prometheus caps a query at 11 000 points.
    s=$START
    while [ "$s" -lt "$END" ]; do
      e=$(( s + 10000 * STEP )); [ "$e" -gt "$END" ] && e=$END
      promtool query range --start "$s" --end "$e" --step ${STEP}s "$URL" "$q" >/dev/null
      s=$(( e + STEP ))
    done
  done
}
export -f ref; export START END STEP URL UP
read -r p_s p_kb < <(timed bash -c ref)
verdict=$($BIN diagnose --prometheus "$URL" --start "$START" --end "$END" --step ${STEP}s --worker-concurrency 10 --json \
  | python3 -c 'import json,sys; d=json.load(sys.stdin)["diagnosis"]; print(d["capping_limit"], (d["settings"].get("runner_limit") or {}).get("value"), d["verdict"][:300])')
# The worker counts of the same range, each judged from its saturated windows.
read -r s_s s_kb < <(timed $BIN scale --prometheus "$URL" --start "$START" --end "$END" --step ${STEP}s --json)
counts=$($BIN scale --prometheus "$URL" --start "$START" --end "$END" --step ${STEP}s --json 2>/dev/null \
  | python3 -c 'import json,sys; d=json.load(sys.stdin); d=d.get("scaling", d); print(" ".join("%d:%.0f/s" % (p["workers"], (p.get("ceiling") or [0])[0]) for p in d["points"]))')
python3 - "$n_s" "$n_kb" "$p_s" "$p_kb" "$s_s" "$s_kb" "$WORKERS" "$DAYS" "$UP" "$counts" "$verdict" <<'EOF'
import sys
n_s, n_kb, p_s, p_kb, s_s, s_kb = map(float, sys.argv[1:7])
w, d, up, counts, v = sys.argv[7], sys.argv[8], sys.argv[9], sys.argv[10], " ".join(sys.argv[11:])
half = (int(w) + 1) // 2
print(f"history {d} d × {w} workers at 15 s{' with up' if up == '1' else ''}: n8ncap {n_s:.1f} s {n_kb/1024:.0f} MB, promtool (fetch only) {p_s:.1f} s {p_kb/1024:.0f} MB"
      f" → time ×{n_s/p_s:.2f}, memory ×{n_kb/p_kb:.2f}; scale --prometheus {s_s:.1f} s {s_kb/1024:.0f} MB, counts {counts}"
      f" (true: {half}:{half*10}/s {w}:{int(w)*10}/s); verdict {v} (true: runner_limit, 5 per worker)")
EOF
