// k6 load: produce through the gateway's gRPC API, with the protos in
// proto/ (no server reflection needed). MODE=unary (default) calls
// ProducerService/Produce once per iteration; MODE=stream opens one
// ProduceStream per iteration and pipelines STREAM_REQUESTS requests on it,
// as skein-bench --transport grpc-stream does.
//
//   k6 run loadtest/k6/produce_grpc.js
//   k6 run -e MODE=stream -e STREAM_REQUESTS=500 -e VUS=2 loadtest/k6/produce_grpc.js
//
// Environment: SKEIN_GATEWAY (127.0.0.1:9090), PROTO_DIR (the repository's
// proto/ relative to this script: ../../proto), TOPIC, PARTITIONS,
// REPLICATION_FACTOR, MIN_ISR, RECORD_SIZE, BATCH, ACKS, VUS, DURATION, RATE
// (see common.js).
import grpc from 'k6/net/grpc';
import { check } from 'k6';
import { Counter, Trend } from 'k6/metrics';
import { GATEWAY, TOPIC, PARTITIONS, REPLICATION_FACTOR, MIN_ISR, BATCH, ACKS, RECORD_SIZE, options as opts, value, partitionFor } from './common.js';

export const options = opts('produce_grpc');

const MODE = __ENV.MODE || 'unary';
const STREAM_REQUESTS = parseInt(__ENV.STREAM_REQUESTS || '200', 10);

const client = new grpc.Client();
client.load([__ENV.PROTO_DIR || '../../proto'], 'skein/v1/producer.proto', 'skein/v1/admin.proto');

const records = new Counter('skein_records_produced');
const failed = new Counter('skein_records_failed');
const bytes = new Counter('skein_bytes_produced');
const latency = new Trend('skein_produce_latency', true);

// Proto JSON: k6 may answer lowerCamelCase or proto names; accept both.
function errorCode(r) {
  return r.errorCode || r.error_code || 'NONE';
}

function request(partition) {
  const recs = [];
  for (let i = 0; i < BATCH; i++) {
    recs.push({ value: value(), partition: partition });
  }
  return { topic: TOPIC, acks: ACKS, records: recs };
}

function count(results) {
  let good = 0;
  for (const r of results || []) {
    if (errorCode(r) === 'NONE') {
      good++;
    }
  }
  records.add(good);
  failed.add(BATCH - good);
  bytes.add(good * RECORD_SIZE);
  return good;
}

export function setup() {
  client.connect(GATEWAY, { plaintext: true });
  const res = client.invoke('skein.v1.AdminService/CreateTopic', {
    name: TOPIC, partitions: PARTITIONS, replication_factor: REPLICATION_FACTOR, configs: { 'min.insync.replicas': MIN_ISR },
  });
  if (res.status !== grpc.StatusOK && res.status !== grpc.StatusAlreadyExists) {
    throw new Error(`creating topic ${TOPIC}: ${JSON.stringify(res.error)}`);
  }
  client.close();
}

let connected = false;
let n = 0;

export default function () {
  if (!connected) {
    client.connect(GATEWAY, { plaintext: true });
    connected = true;
  }
  if (MODE === 'stream') {
    stream();
    return;
  }
  const t0 = Date.now();
  const res = client.invoke('skein.v1.ProducerService/Produce', request(partitionFor(n++ + __VU)));
  if (!check(res, { 'status OK': (r) => r.status === grpc.StatusOK })) {
    failed.add(BATCH);
    return;
  }
  check(count(res.message.results), { 'every record acknowledged': (g) => g === BATCH });
  latency.add(Date.now() - t0);
}

// stream pipelines STREAM_REQUESTS requests on one ProduceStream and times
// each from its write to its answer.
function stream() {
  const s = new grpc.Stream(client, 'skein.v1.ProducerService/ProduceStream');
  const sentAt = {};
  s.on('data', (resp) => {
    const id = String(resp.correlationId || resp.correlation_id);
    count(resp.results);
    if (sentAt[id] !== undefined) {
      latency.add(Date.now() - sentAt[id]);
      delete sentAt[id];
    }
  });
  s.on('error', (e) => {
    check(e, { 'stream without error': () => false });
  });
  for (let i = 1; i <= STREAM_REQUESTS; i++) {
    const req = request(partitionFor(n++ + __VU));
    req.correlation_id = i;
    sentAt[String(i)] = Date.now();
    s.write(req);
  }
  s.end();
}
