// k6 load: consume through the gateway's REST API, one partition per VU,
// from the earliest offset, measuring fetch latency and, on values stamped by
// skein-bench or these scripts, end-to-end latency (ms resolution).
//
//   k6 run -e PARTITIONS=3 -e VUS=3 loadtest/k6/consume_rest.js
//
// Environment: SKEIN_REST, TOPIC (k6-bench), PARTITIONS (1), VUS (4; VU i
// reads partition (i-1) % PARTITIONS), DURATION (30s), MAX_RECORDS (1000),
// MAX_WAIT_MS (500).
import http from 'k6/http';
import { check } from 'k6';
import { Counter, Trend } from 'k6/metrics';
import { REST, TOPIC, PARTITIONS, options as opts, sentAtMs } from './common.js';

export const options = opts('consume_rest');

const MAX_RECORDS = parseInt(__ENV.MAX_RECORDS || '1000', 10);
const MAX_WAIT_MS = parseInt(__ENV.MAX_WAIT_MS || '500', 10);

const records = new Counter('skein_records_consumed');
const bytes = new Counter('skein_bytes_consumed');
const fetchLatency = new Trend('skein_fetch_latency', true);
const e2e = new Trend('skein_end_to_end_latency', true);

let offset = 0; // per VU: each VU has its own copy

export default function () {
  const partition = (__VU - 1) % PARTITIONS;
  const url = `${REST}/v1/topics/${TOPIC}/partitions/${partition}/records?offset=${offset}&max_records=${MAX_RECORDS}&max_wait_ms=${MAX_WAIT_MS}`;
  const res = http.get(url);
  if (!check(res, { 'status 200': (r) => r.status === 200 })) {
    return;
  }
  const now = Date.now();
  const body = res.json();
  fetchLatency.add(res.timings.duration);
  for (const r of body.records || []) {
    const v = r.value || '';
    bytes.add(v.length);
    const sent = sentAtMs(v);
    if (!isNaN(sent)) {
      e2e.add(now - sent);
    }
  }
  records.add((body.records || []).length);
  const next = parseInt(body.next_offset, 10);
  if (next > offset) {
    offset = next;
  }
}
