// An open-model run (ramping-arrival-rate): each held rate is a level, judged by the
// executions that completed in it; the backlog and k6's dropped iterations say how far the
// offered rate was above what the stack completes.
//
//   k6 run --out json=out.json examples/k6/arrival.js
//   n8ncap diagnose --k6-json out.json --body '{"sleep_ms":400}'
//
// Environment: URL (webhook), SLEEP_MS (Code time), STAGES (duration:rate per second,
// comma-separated; default 8/s for 15 s, a ramp to 20/s in 5 s, 20/s for 15 s), MAX_VUS.
import http from 'k6/http';
import { check } from 'k6';

const url = __ENV.URL || 'http://127.0.0.1:5678/webhook/load';
const sleepMs = Number(__ENV.SLEEP_MS || 400);
const spec = (__ENV.STAGES || '15s:8,5s:20,15s:20').split(',').map((s) => {
  const [duration, target] = s.split(':');
  return { duration, target: Number(target) };
});

export const options = {
  scenarios: {
    arrivals: {
      executor: 'ramping-arrival-rate',
      startRate: spec[0].target,
      timeUnit: '1s',
      preAllocatedVUs: Number(__ENV.MAX_VUS || 200),
      maxVUs: Number(__ENV.MAX_VUS || 200),
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
