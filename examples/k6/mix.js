// A traffic mix as k6 users write it: two scenarios at once, each with its own virtual users —
// `code` posts to the example workflow (a Code node of SLEEP_MS), `notify` to a workflow without
// a Code node. `n8ncap diagnose --k6-json` reads them as one stage per VU level with each
// scenario's figures (scenarios that run one after another, with startTime, stay stages).
//
//   k6 run --out json=out.json examples/k6/mix.js
//   n8ncap diagnose --k6-json out.json --k6-warmup 5s --worker-concurrency 10 --runner-limit 10 \
//     --job-time 1s --code-time 0.3s
//
// Environment: BASE (n8n's origin), SLEEP_MS, VUS_CODE, VUS_NOTIFY, STAGE_S (seconds).
import http from 'k6/http';
import { check } from 'k6';

const base = __ENV.BASE || 'http://127.0.0.1:5678';
const sleepMs = Number(__ENV.SLEEP_MS || 1000);
const stageS = Number(__ENV.STAGE_S || 60);

export const options = {
  scenarios: {
    code: {
      executor: 'constant-vus',
      vus: Number(__ENV.VUS_CODE || 3),
      duration: `${stageS}s`,
      exec: 'code',
    },
    notify: {
      executor: 'constant-vus',
      vus: Number(__ENV.VUS_NOTIFY || 7),
      duration: `${stageS}s`,
      exec: 'notify',
    },
  },
  thresholds: { http_req_failed: ['rate<0.05'], checks: ['rate>0.99'] },
};

const params = { headers: { 'content-type': 'application/json' }, timeout: '120s' };

function post(path, body) {
  const r = http.post(`${base}${path}`, JSON.stringify(body), params);
  check(r, { 'status == 200': (res) => res.status === 200 });
}

export function code() {
  post('/webhook/load', { sleep_ms: sleepMs });
}

export function notify() {
  post('/webhook/notify', { sleep_ms: sleepMs, code: false });
}
