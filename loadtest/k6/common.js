// Shared settings and helpers of the k6 scripts. Values start with the send
// time as 19 decimal digits of Unix nanoseconds (k6 clocks have millisecond
// resolution, so the last six digits are zeros): the same stamp skein-bench
// writes, so either tool's consumer measures end-to-end latency on records
// from either tool's producer.

export const REST = __ENV.SKEIN_REST || 'http://127.0.0.1:8080';
export const GATEWAY = __ENV.SKEIN_GATEWAY || '127.0.0.1:9090';
export const TOPIC = __ENV.TOPIC || 'k6-bench';
export const PARTITIONS = parseInt(__ENV.PARTITIONS || '1', 10);
export const REPLICATION_FACTOR = parseInt(__ENV.REPLICATION_FACTOR || '3', 10);
export const MIN_ISR = __ENV.MIN_ISR || '2';
export const RECORD_SIZE = parseInt(__ENV.RECORD_SIZE || '1024', 10);
export const BATCH = parseInt(__ENV.BATCH || '1', 10);
export const ACKS = parseInt(__ENV.ACKS || '-1', 10);
export const VUS = parseInt(__ENV.VUS || '4', 10);
export const DURATION = __ENV.DURATION || '30s';

// options runs VUS virtual users for DURATION, or, with RATE set, a
// constant arrival rate of RATE requests per second (each of BATCH records),
// which keeps offering load when the server slows down.
export function options(scenario) {
  const rate = parseInt(__ENV.RATE || '0', 10);
  const s = rate > 0
    ? { executor: 'constant-arrival-rate', rate: rate, timeUnit: '1s', duration: DURATION,
        preAllocatedVUs: VUS, maxVUs: VUS * 8 }
    : { executor: 'constant-vus', vus: VUS, duration: DURATION };
  const scenarios = {};
  scenarios[scenario] = s;
  return { scenarios: scenarios, summaryTrendStats: ['avg', 'med', 'p(95)', 'p(99)', 'p(99.9)', 'max'] };
}

const FILLER = 'abcdefghijklmnopqrstuvwxyz'.repeat(Math.ceil(RECORD_SIZE / 26) + 1);

// value is a RECORD_SIZE-character record value stamped with now.
export function value() {
  const stamp = String(Date.now()) + '000000';
  return (stamp + FILLER).substring(0, Math.max(RECORD_SIZE, stamp.length));
}

// sentAtMs reads the stamp back, in milliseconds since the epoch, or NaN.
export function sentAtMs(v) {
  if (typeof v !== 'string' || v.length < 19 || !/^[0-9]{19}/.test(v)) {
    return NaN;
  }
  return parseInt(v.substring(0, 13), 10);
}

// partitionFor spreads requests round-robin over the partitions.
export function partitionFor(i) {
  return i % PARTITIONS;
}
