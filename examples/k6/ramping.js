// A ramping-vus run, the executor most capacity tests use: held steps are the levels n8ncap
// judges, the ramps between them are windows it reports.
//
//   k6 run --out json=out.json examples/k6/ramping.js
//   n8ncap diagnose --k6-json out.json --body '{"sleep_ms":400}'
//
// Environment: URL (webhook), SLEEP_MS (Code time), STAGES (k6 stages as duration:target,
// comma-separated; default: ramp to 4 in 4 s, hold 14 s, ramp to 16 in 4 s, hold 14 s).
import http from 'k6/http';
import { check } from 'k6';

const url = __ENV.URL || 'http://127.0.0.1:5678/webhook/load';
const sleepMs = Number(__ENV.SLEEP_MS || 400);
const stages = (__ENV.STAGES || '4s:4,14s:4,4s:16,14s:16').split(',').map((s) => {
  const [duration, target] = s.split(':');
  return { duration, target: Number(target) };
});

export const options = {
  scenarios: {
    ramp: { executor: 'ramping-vus', startVUs: 0, stages, gracefulRampDown: '0s' },
  },
};

const body = JSON.stringify({ sleep_ms: sleepMs, wait_ms: 0, alloc_mb: 0 });
const params = { headers: { 'content-type': 'application/json' }, timeout: '120s' };

export default function () {
  const r = http.post(url, body, params);
  check(r, { 'status == 200': (res) => res.status === 200 });
}
