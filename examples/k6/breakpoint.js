// The breakpoint profile (profiles/breakpoint.yaml) as a k6 script: closed load of 15, 30, 50,
// 80 and 120 virtual users, one scenario per stage so `n8ncap diagnose --k6-json` finds the
// stages, the same body, checks and thresholds.
//
//   k6 run --out json=out.json --summary-export summary.json examples/k6/breakpoint.js
//   n8ncap diagnose --k6-json out.json --k6-warmup 15s --body '{"sleep_ms":3000}' \
//     --worker-concurrency 15 --runner-limit 10
//
// Environment: URL (webhook), SLEEP_MS (Code time), VUS (comma list), STAGE_S (seconds per
// stage, warm-up included).
import http from 'k6/http';
import { check } from 'k6';

const url = __ENV.URL || 'http://127.0.0.1:5678/webhook/load';
const sleepMs = Number(__ENV.SLEEP_MS || 3000);
const vus = (__ENV.VUS || '15,30,50,80,120').split(',').map(Number);
const stageS = Number(__ENV.STAGE_S || 75);

const scenarios = {};
vus.forEach((n, i) => {
  scenarios[`stage_${String(i + 1).padStart(2, '0')}_${n}vus`] = {
    executor: 'constant-vus',
    vus: n,
    duration: `${stageS}s`,
    startTime: `${i * stageS}s`,
    gracefulStop: '0s',
  };
});

export const options = {
  scenarios,
  thresholds: {
    http_req_failed: ['rate<0.05'],
    http_req_duration: ['p(95)<60000'],
    checks: ['rate>0.99'],
  },
};

const body = JSON.stringify({ sleep_ms: sleepMs, wait_ms: 0, alloc_mb: 0 });
const params = { headers: { 'content-type': 'application/json' }, timeout: '120s' };

export default function () {
  const r = http.post(url, body, params);
  check(r, {
    'status == 200': (res) => res.status === 200,
    'ok == true': (res) => {
      try {
        return res.json('ok') === true;
      } catch (e) {
        return false;
      }
    },
  });
}
