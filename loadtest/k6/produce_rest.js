// k6 load: produce through the gateway's REST API.
//
//   k6 run loadtest/k6/produce_rest.js
//   k6 run -e RATE=2000 -e DURATION=1m -e RECORD_SIZE=1024 loadtest/k6/produce_rest.js
//
// Environment: SKEIN_REST (http://127.0.0.1:8080), TOPIC (k6-bench; created
// in setup with PARTITIONS, REPLICATION_FACTOR, MIN_ISR unless it exists),
// RECORD_SIZE (1024), BATCH (records per request, 1), ACKS (-1), VUS (4),
// DURATION (30s), RATE (requests/s; unset: as fast as VUS allow).
import http from 'k6/http';
import { check } from 'k6';
import { Counter, Trend } from 'k6/metrics';
import { REST, TOPIC, PARTITIONS, REPLICATION_FACTOR, MIN_ISR, BATCH, ACKS, RECORD_SIZE, options as opts, value, partitionFor } from './common.js';

export const options = opts('produce_rest');

const records = new Counter('skein_records_produced');
const failed = new Counter('skein_records_failed');
const bytes = new Counter('skein_bytes_produced');
const latency = new Trend('skein_produce_latency', true);

const JSON_HEADERS = { headers: { 'Content-Type': 'application/json' } };

export function setup() {
  const body = JSON.stringify({ name: TOPIC, partitions: PARTITIONS, replication_factor: REPLICATION_FACTOR,
    configs: { 'min.insync.replicas': MIN_ISR } });
  const res = http.post(`${REST}/v1/topics`, body, JSON_HEADERS);
  if (res.status !== 200 && !(res.status === 409 && res.body.includes('TOPIC_ALREADY_EXISTS'))) {
    throw new Error(`creating topic ${TOPIC}: ${res.status} ${res.body}`);
  }
}

let n = 0;

export default function () {
  const partition = partitionFor(n++ + __VU);
  const recs = [];
  for (let i = 0; i < BATCH; i++) {
    recs.push({ value: value(), partition: partition });
  }
  const res = http.post(`${REST}/v1/topics/${TOPIC}/records`, JSON.stringify({ acks: ACKS, records: recs }), JSON_HEADERS);
  const ok = check(res, { 'status 200': (r) => r.status === 200 });
  if (!ok) {
    failed.add(BATCH);
    return;
  }
  const results = res.json('results') || [];
  let good = 0;
  for (const r of results) {
    if (r.error_code === 'NONE') {
      good++;
    }
  }
  check(good, { 'every record acknowledged': (g) => g === BATCH });
  records.add(good);
  failed.add(BATCH - good);
  bytes.add(good * RECORD_SIZE);
  latency.add(res.timings.duration);
}
