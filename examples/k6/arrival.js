// An open-model run (ramping-arrival-rate): each held rate is a level, judged by the
// executions that completed in it; the backlog and k6's dropped iterations say how far the
// offered rate was above what the stack completes.
//
//   k6 run --out json=out.json examples/k6/arrival.js
//   n8ncap diagnose --k6-json out.json --body '{"sleep_ms":400}'
//
// Environment: URL (webhook), SLEEP_MS (Code time), STAGES (duration:rate per second,
// comma-separated; default 8/s for 15 s, a ramp to 20/s in 5 s, 20/s for 15 s; one stage runs
// constant-arrival-rate), MAX_VUS (k6's pre-allocated and most VUs).
import http from 'k6/http';
import { check } from 'k6';

const url = __ENV.URL || 'http://127.0.0.1:5678/webhook/load';
const sleepMs = Number(__ENV.SLEEP_MS || 400);
const spec = (__ENV.STAGES || '15s:8,5s:20,15s:20').split(',').map((s) => {
  const [duration, target] = s.split(':');
  return { duration, target: Number(target) };
});

const vus = Number(__ENV.MAX_VUS || 200);

// One stage is k6's constant-arrival-rate; several, ramping-arrival-rate.
export const options = {
  scenarios: {
    arrivals:
      spec.length === 1
        ? {
            executor: 'constant-arrival-rate',
            rate: spec[0].target,
            timeUnit: '1s',
            duration: spec[0].duration,
            preAllocatedVUs: vus,
            maxVUs: vus,
          }
        : {
            executor: 'ramping-arrival-rate',
            startRate: spec[0].target,
            timeUnit: '1s',
            preAllocatedVUs: vus,
            maxVUs: vus,
            stages: spec,
          },
  },
};

const body = JSON.stringify({ sleep_ms: sleepMs, wait_ms: 0, alloc_mb: 0 });
const params = { headers: { 'content-type': 'application/json' }, timeout: '120s' };

export default function () {
  const r = http.post(url, body, params);
  check(r, { 'status == 200': (res) => res.status === 200 });
}
