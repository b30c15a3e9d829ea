// Skein Console: renders the gateway's event stream (GET /v1/events) and
// drives demos through the public REST API. Plain JavaScript, no build step.
'use strict';

const state = {
  cluster: null,      // the "cluster" event: GetCluster plus coordinators
  topics: [],         // the "topics" event: one topic description each
  groups: [],         // the "groups" event: one group description each
  demo: { enabled: false, nodes: [], reason: '' },
  seen: null,         // what the last events showed, to log what changed
  members: [],        // consumers this page runs
};

// ---- small helpers ----

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k === 'style') e.setAttribute('style', v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k.startsWith('data-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function num(v) { return v === undefined || v === null ? -1 : Number(v); }

function now() { return new Date().toLocaleTimeString(); }

function logEvent(text, cls) {
  const list = document.getElementById('event-log');
  list.prepend(el('li', { class: cls || '' }, `${now()}  ${text}`));
  while (list.children.length > 300) list.lastChild.remove();
}

// api calls the gateway's REST API; it answers the JSON body, or throws an
// Error carrying the API's error_code and message.
async function api(method, path, body) {
  const opts = { method, headers: {} };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  const text = await resp.text();
  let doc = {};
  try { doc = text ? JSON.parse(text) : {}; } catch (_) { doc = { message: text }; }
  if (!resp.ok) {
    const err = new Error(`${resp.status} ${doc.error_code || ''}: ${doc.message || ''}`);
    err.status = resp.status;
    err.code = doc.error_code;
    throw err;
  }
  return doc;
}

// ---- the event stream ----

function setStatus(on) {
  const s = document.getElementById('conn-status');
  s.textContent = on ? 'live' : 'reconnecting';
  s.className = 'status ' + (on ? 'on' : 'off');
}

function connect() {
  const es = new EventSource('/v1/events');
  es.onopen = () => setStatus(true);
  es.onerror = () => setStatus(false); // EventSource reconnects by itself
  es.addEventListener('cluster', (e) => { state.cluster = JSON.parse(e.data); renderCluster(); noteChanges(); refreshDemo(); });
  es.addEventListener('topics', (e) => { state.topics = JSON.parse(e.data).topics || []; renderTopics(); renderBrokers(); noteChanges(); });
  es.addEventListener('groups', (e) => { state.groups = JSON.parse(e.data).groups || []; renderGroups(); noteChanges(); });
}

// ---- what changed, in words ----

function snapshot() {
  const s = { brokers: {}, controllers: {}, controller: -1, partitions: {}, groups: {} };
  if (state.cluster) {
    for (const b of state.cluster.brokers || []) s.brokers[b.id] = b.state;
    for (const c of state.cluster.controllers || []) s.controllers[c.id] = c.state || '';
    s.controller = state.cluster.controller_id;
  }
  const showInternal = document.getElementById('show-internal').checked;
  for (const t of state.topics) {
    if (t.internal && !showInternal) continue;
    for (const p of t.partitions || []) {
      s.partitions[`${t.name}/${p.partition}`] = { leader: p.leader, epoch: p.leader_epoch, isr: (p.isr || []).join(',') };
    }
  }
  for (const g of state.groups) {
    s.groups[g.group] = { epoch: g.group_epoch, state: g.state, members: (g.members || []).length };
  }
  return s;
}

function noteChanges() {
  const cur = snapshot();
  const prev = state.seen;
  state.seen = cur;
  if (!prev) return;
  for (const [id, st] of Object.entries(cur.brokers)) {
    if (prev.brokers[id] && prev.brokers[id] !== st) logEvent(`broker ${id}: ${prev.brokers[id]} → ${st}`, st === 'ALIVE' ? 'ok' : 'err');
  }
  for (const [id, st] of Object.entries(cur.controllers)) {
    if (prev.controllers[id] && st && prev.controllers[id] !== st) logEvent(`controller ${id}: ${prev.controllers[id]} → ${st}`, st === 'ALIVE' ? 'ok' : 'err');
  }
  if (prev.controller !== cur.controller && cur.controller !== undefined) logEvent(`controller ${cur.controller} leads the Raft quorum (was ${prev.controller})`);
  for (const [key, p] of Object.entries(cur.partitions)) {
    const q = prev.partitions[key];
    if (!q) continue;
    if (q.leader !== p.leader || q.epoch !== p.epoch) {
      logEvent(`${key}: leader ${q.leader} → ${p.leader}, epoch ${q.epoch} → ${p.epoch}`, p.leader < 0 ? 'err' : '');
    }
    if (q.isr !== p.isr) {
      const members = (isr) => (isr ? isr.split(',').length : 0);
      const shrink = members(p.isr) < members(q.isr);
      logEvent(`${key}: ISR [${q.isr}] → [${p.isr}] (${shrink ? 'shrink' : 'expand'})`, shrink ? 'err' : 'ok');
    }
  }
  for (const [name, g] of Object.entries(cur.groups)) {
    const q = prev.groups[name];
    if (!q) { logEvent(`group ${name} appeared (${g.state}, ${g.members} members)`); continue; }
    if (q.epoch !== g.epoch || q.state !== g.state || q.members !== g.members) {
      logEvent(`group ${name}: epoch ${q.epoch} → ${g.epoch}, ${g.state}, ${g.members} member(s) — rebalance`);
    }
  }
}

// ---- cluster ----

function leaderCounts() {
  const counts = {};
  for (const t of state.topics) {
    for (const p of t.partitions || []) counts[p.leader] = (counts[p.leader] || 0) + 1;
  }
  return counts;
}

function renderCluster() {
  const c = state.cluster;
  if (!c) return;
  document.getElementById('cluster-id').textContent = 'cluster ' + c.cluster_id;
  renderBrokers();
  const ctrl = document.querySelector('#controllers tbody');
  ctrl.replaceChildren(...(c.controllers || []).map((x) => el('tr', { 'data-controller': x.id },
    el('td', {}, x.id), el('td', { class: 'nums' }, x.addr),
    el('td', {}, x.leader ? el('span', { class: 'badge leader' }, 'Raft leader') : 'follower'),
    el('td', { class: x.state === 'ALIVE' ? 'state-ALIVE' : (x.state ? 'state-dead' : '') }, x.state || '–'))));
  const co = document.querySelector('#coordinators tbody');
  co.replaceChildren(...(c.coordinators || []).map((x) => el('tr', {},
    el('td', {}, x.kind.replace('COORDINATOR_KIND_', '').toLowerCase()), el('td', {}, x.id),
    el('td', { class: 'nums' }, x.grpc_addr),
    el('td', { class: x.alive ? 'state-ALIVE' : 'state-dead' }, x.alive ? 'ALIVE' : 'DEAD'))));
}

function renderBrokers() {
  const c = state.cluster;
  if (!c) return;
  const counts = leaderCounts();
  const nodes = {};
  for (const n of state.demo.nodes || []) nodes[n.id] = n;
  const body = document.querySelector('#brokers tbody');
  body.replaceChildren(...(c.brokers || []).map((b) => {
    const n = nodes[b.id];
    const demo = el('td', { class: 'demo-only' });
    if (n) {
      demo.append(el('span', { class: 'state-' + n.state }, n.state), ' ');
      if (n.state !== 'exited') {
        demo.append(
          el('button', { class: 'danger', 'data-action': 'kill', 'data-node': b.id, onclick: () => demoAction(b.id, 'kill') }, 'kill -9'), ' ',
          n.state === 'paused'
            ? el('button', { 'data-action': 'resume', 'data-node': b.id, onclick: () => demoAction(b.id, 'resume') }, 'resume')
            : el('button', { 'data-action': 'pause', 'data-node': b.id, onclick: () => demoAction(b.id, 'pause') }, 'pause'));
      }
    }
    return el('tr', { 'data-broker': b.id, 'data-state': b.state },
      el('td', {}, b.id), el('td', { class: 'nums' }, b.grpc_addr),
      el('td', { class: 'state-' + b.state }, b.state), el('td', {}, counts[b.id] || 0), demo);
  }));
}

// ---- demos (skein dev --console-demos) ----

async function refreshDemo() {
  try {
    state.demo = await api('GET', '/v1/console/demo');
  } catch (_) {
    state.demo = { enabled: false, nodes: [], reason: 'the gateway did not answer' };
  }
  document.body.classList.toggle('demos', !!state.demo.enabled);
  document.getElementById('demo-note').textContent = state.demo.enabled
    ? 'Demo buttons signal the storage processes of this skein dev cluster.' : (state.demo.reason || '');
  renderBrokers();
}

async function demoAction(id, action) {
  try {
    const r = await api('POST', `/v1/console/demo/storage/${id}/${action}`);
    logEvent(`demo: ${action} storage node ${id} (pid ${r.pid})`, 'err');
  } catch (e) {
    logEvent(`demo: ${action} storage node ${id} refused: ${e.message}`, 'err');
  }
  setTimeout(refreshDemo, 300);
}

// ---- topics ----

function replicaLEO(p, id) {
  for (const r of p.replica_offsets || []) {
    if (r.replica === id) return num(r.log_end_offset);
  }
  return id === p.leader ? num(p.high_watermark) : -1;
}

function logBar(p, id, scale) {
  const hw = num(p.high_watermark), start = Math.max(num(p.log_start_offset), 0), leo = replicaLEO(p, id);
  const pct = (v) => `${(100 * Math.max(v, 0) / scale).toFixed(2)}%`;
  const bar = el('div', { class: 'bar', title: `log start ${start}, high watermark ${hw}, log end ${leo < 0 ? 'unknown' : leo}` });
  if (leo >= 0) {
    const committed = Math.min(leo, Math.max(hw, 0));
    bar.append(el('div', { class: 'committed', style: `width:${pct(committed)}` }));
    if (leo > committed) bar.append(el('div', { class: 'uncommitted', style: `left:${pct(committed)};width:${pct(leo - committed)}` }));
  }
  if (start > 0) bar.append(el('div', { class: 'start', style: `width:${pct(start)}` }));
  if (hw >= 0) bar.append(el('div', { class: 'hw', style: `left:calc(${pct(hw)} - 1px)` }));
  return { bar, leo };
}

function replicaRows(p) {
  const isr = new Set(p.isr || []);
  let scale = Math.max(num(p.high_watermark), 1);
  for (const id of p.replicas || []) scale = Math.max(scale, replicaLEO(p, id));
  return (p.replicas || []).map((id) => {
    const role = id === p.leader ? ['leader', 'L'] : isr.has(id) ? ['follower', 'F'] : ['out', 'OUT'];
    const { bar, leo } = logBar(p, id, scale);
    return el('div', { class: 'replica', 'data-replica': id, 'data-role': role[0] },
      el('span', {}, el('span', { class: 'badge ' + role[0] }, role[1]), ` broker ${id}`),
      bar,
      el('span', { class: 'nums' }, `LEO ${leo < 0 ? '?' : leo}`));
  });
}

function renderTopics() {
  const showInternal = document.getElementById('show-internal').checked;
  const box = document.getElementById('topics');
  const topics = state.topics.filter((t) => showInternal || !t.internal).sort((a, b) => a.name.localeCompare(b.name));
  box.replaceChildren(...topics.map((t) => {
    const minISR = Number((t.configs || {})['min.insync.replicas'] || 1);
    const rows = (t.partitions || []).map((p) => {
      const isrSize = (p.isr || []).length, rf = (p.replicas || []).length;
      const offline = p.leader < 0, urp = !offline && isrSize < rf;
      const flags = [];
      if (offline) flags.push(el('span', { class: 'badge offline' }, 'OFFLINE'));
      if (urp) flags.push(el('span', { class: 'badge urp' }, 'UNDER-REPLICATED'));
      if (!offline && isrSize < minISR) flags.push(' ', el('span', { class: 'badge out' }, 'ISR < min.insync'));
      return el('tr', {
        class: 'partition' + (urp ? ' under-replicated' : '') + (offline ? ' offline' : ''),
        'data-topic': t.name, 'data-partition': p.partition, 'data-leader': p.leader,
        'data-epoch': p.leader_epoch, 'data-hw': num(p.high_watermark), 'data-isr': (p.isr || []).join(','),
      },
      el('td', {}, p.partition),
      el('td', {}, offline ? 'none' : `broker ${p.leader}`),
      el('td', {}, p.leader_epoch),
      el('td', {}, `[${(p.isr || []).join(', ')}]`, ' ', flags),
      el('td', { class: 'nums' }, `HW ${num(p.high_watermark)}`, el('br'), `start ${num(p.log_start_offset)}`),
      el('td', { style: 'width:45%' }, replicaRows(p)));
    });
    return el('div', { class: 'topic', 'data-topic': t.name },
      el('h3', {}, t.name, ' ', el('span', { class: 'muted' },
        `${(t.partitions || []).length} partitions, replication ${t.replication_factor}, min.insync.replicas ${minISR}${t.internal ? ', internal' : ''}`)),
      el('table', {}, el('thead', {}, el('tr', {}, ['partition', 'leader', 'epoch', 'ISR', 'offsets', 'replicas: log end (bar: committed | uncommitted)'].map((h) => el('th', {}, h)))),
        el('tbody', {}, rows)));
  }));
  fillTopicSelects();
}

function fillTopicSelects() {
  const names = state.topics.filter((t) => !t.internal).map((t) => t.name).sort();
  for (const id of ['produce-topic', 'join-topic']) {
    const sel = document.getElementById(id);
    const cur = sel.value;
    if ([...sel.options].map((o) => o.value).join('\n') === names.join('\n')) continue;
    sel.replaceChildren(...names.map((n) => el('option', { value: n }, n)));
    if (names.includes(cur)) sel.value = cur;
  }
}

async function createTopic(ev) {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const body = {
    name: f.get('name'), partitions: Number(f.get('partitions')), replication_factor: Number(f.get('replication_factor')),
    configs: { 'min.insync.replicas': String(f.get('min_isr')) },
  };
  try {
    await api('POST', '/v1/topics', body);
    logEvent(`created topic ${body.name}: ${body.partitions} partitions, replication ${body.replication_factor}`, 'ok');
  } catch (e) {
    logEvent(`create topic ${body.name} refused: ${e.message}`, 'err');
  }
}

// ---- produce ----

async function produce(acks) {
  const topic = document.getElementById('produce-topic').value;
  if (!topic) { logEvent('produce: create a topic first', 'err'); return; }
  const key = document.getElementById('produce-key').value;
  const value = document.getElementById('produce-value').value;
  const count = Math.max(1, Math.min(1000, Number(document.getElementById('produce-count').value) || 1));
  const records = [];
  for (let i = 0; i < count; i++) {
    const r = { value: count > 1 ? `${value} ${i}` : value };
    if (key) r.key = key;
    records.push(r);
  }
  const label = acks === -1 ? 'all' : String(acks);
  const started = performance.now();
  const li = el('li', {}, `${now()}  acks=${label}: ${count} record(s) to ${topic}… waiting`);
  document.getElementById('produce-results').prepend(li);
  try {
    const r = await api('POST', `/v1/topics/${encodeURIComponent(topic)}/records`, { acks, records });
    const ms = (performance.now() - started).toFixed(1);
    const results = r.results || [];
    const bad = results.filter((x) => x.error_code !== 'NONE');
    const parts = [...new Set(results.map((x) => x.partition))].join(',');
    const offs = results.map((x) => num(x.offset)).filter((o) => o >= 0);
    const where = offs.length ? `offsets ${Math.min(...offs)}–${Math.max(...offs)}` : 'offset -1 (not waited for)';
    li.textContent = `${now()}  acks=${label}: acknowledged in ${ms} ms — ${results.length - bad.length}/${results.length} ${results[0] ? results[0].outcome : ''}, partition ${parts}, ${where}` +
      (bad.length ? ` — ${bad[0].error_code}: ${bad[0].message}` : '');
    li.className = bad.length ? 'err' : 'ok';
    li.setAttribute('data-acks', label);
    if (acks !== 0) {
      results.forEach((x, i) => {
        if (x.error_code === 'NONE' && num(x.offset) >= 0) {
          acknowledged.push({ topic, partition: x.partition, offset: num(x.offset), value: records[i].value, acks: label });
        }
      });
    }
  } catch (e) {
    li.textContent = `${now()}  acks=${label}: refused after ${(performance.now() - started).toFixed(1)} ms — ${e.message}`;
    li.className = 'err';
  }
}

// ---- audit: which acknowledged records are still in the log ----

// Every record this page had acknowledged with acks=1 or acks=all.
const acknowledged = [];

// readPartition reads a partition from its log start (a fetch without an
// offset starts there: retention or delete-records may have moved it past
// 0) up to its high watermark: the records (offset → value), that high
// watermark and the log start.
async function readPartition(topic, partition) {
  const out = new Map();
  let offset = -1;
  let hw = 0;
  let logStart = 0;
  for (let round = 0; round < 200; round++) {
    const from = offset < 0 ? '' : `offset=${offset}&`;
    const r = await api('GET', `/v1/topics/${encodeURIComponent(topic)}/partitions/${partition}/records?${from}max_records=1000`);
    for (const rec of r.records || []) out.set(num(rec.offset), rec.value);
    hw = num(r.high_watermark);
    if (offset < 0) logStart = num(r.log_start_offset);
    const next = num(r.next_offset);
    if (next <= offset || next >= hw) break;
    offset = next;
  }
  return { log: out, hw, logStart };
}

// audit reads back every partition this page produced to and counts the
// acknowledged records that are no longer at their offset. A record at or
// above a partition's high watermark is not readable yet (a new leader
// learns the high watermark from its followers a moment after it is
// elected): the audit asks again for up to 5 s before it calls it lost.
async function audit() {
  const li = el('li', {}, `${now()}  audit of ${acknowledged.length} acknowledged record(s)… reading`);
  document.getElementById('produce-results').prepend(li);
  const byTP = new Map();
  for (const a of acknowledged) {
    const k = `${a.topic}\u0000${a.partition}`;
    if (!byTP.has(k)) byTP.set(k, []);
    byTP.get(k).push(a);
  }
  let lost, kept, deleted;
  try {
    for (let attempt = 0; attempt < 10; attempt++) {
      lost = { '1': 0, 'all': 0 };
      kept = { '1': 0, 'all': 0 };
      deleted = 0;
      let pending = 0;
      for (const list of byTP.values()) {
        const { log, hw, logStart } = await readPartition(list[0].topic, list[0].partition);
        for (const a of list) {
          if (log.get(a.offset) === a.value) kept[a.acks]++;
          else if (a.offset < logStart) deleted++; // retention or delete-records: not lost
          else if (a.offset >= hw) { pending++; lost[a.acks]++; }
          else lost[a.acks]++;
        }
      }
      if (pending === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  } catch (e) {
    li.textContent = `${now()}  audit failed: ${e.message}`;
    li.className = 'err';
    return;
  }
  li.textContent = `${now()}  audit: acks=1 — ${kept['1']} still in the log, ${lost['1']} acknowledged and lost; ` +
    `acks=all — ${kept['all']} still in the log, ${lost['all']} lost` +
    (deleted > 0 ? `; and ${deleted} acknowledged record(s) below the log start (deleted by retention or delete-records)` : '');
  li.className = lost['all'] > 0 ? 'err' : (lost['1'] > 0 ? 'warn' : 'ok');
  li.setAttribute('data-audit', `${lost['1']},${lost['all']}`);
}

// ---- consumer groups ----

function table(headers, rows) {
  return el('table', {},
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))),
    el('tbody', {}, rows));
}

function memberRow(m) {
  const mine = state.members.some((x) => x.id === m.member_id) ? ' (this page)' : '';
  const assigned = (m.assignment || []).map((a) => `${a.topic}: [${(a.partitions || []).join(', ')}]`).join('; ');
  return el('tr', { 'data-member': m.member_id },
    el('td', { class: 'nums' }, m.member_id.slice(0, 12) + mine),
    el('td', {}, m.member_epoch),
    el('td', {}, assigned || '(none yet)'));
}

// known shows an offset or a lag, '-' for -1: an assigned partition with
// nothing committed has neither.
function known(v) { return num(v) < 0 ? '-' : num(v); }

function offsetRow(o) {
  return el('tr', {},
    el('td', {}, o.topic), el('td', {}, o.partition), el('td', {}, known(o.offset)),
    el('td', {}, known(o.high_watermark)),
    el('td', { class: num(o.lag) > 0 ? 'err' : 'ok' }, known(o.lag)));
}

function renderGroups() {
  const box = document.getElementById('groups');
  box.replaceChildren(...state.groups.map((g) => el('div', { class: 'group', 'data-group': g.group, 'data-epoch': g.group_epoch },
    el('h3', {}, `${g.group} `, el('span', { class: 'muted' },
      `${g.state}, epoch ${g.group_epoch}, assignor ${g.assignor || '-'}, total lag ${num(g.total_lag)}`)),
    table(['member', 'epoch', 'assigned partitions'], (g.members || []).map(memberRow)),
    table(['topic', 'partition', 'committed', 'high watermark', 'lag'], (g.offsets || []).map(offsetRow)))));
}

function renderMembers() {
  const ul = document.getElementById('my-members');
  ul.replaceChildren(...state.members.map((m) => el('li', { 'data-member': m.id },
    `${m.group}: member ${m.id.slice(0, 12)} (epoch ${m.epoch}) read ${m.read} record(s) `,
    el('button', { onclick: () => leave(m) }, 'leave'))));
}

async function join(ev) {
  ev.preventDefault();
  const group = document.getElementById('join-group-name').value;
  const topic = document.getElementById('join-topic').value;
  if (!topic) { logEvent('add a consumer: create a topic first', 'err'); return; }
  try {
    const r = await api('POST', `/v1/groups/${encodeURIComponent(group)}/members`,
      { topics: [topic], auto_offset_reset: 'earliest', session_timeout_ms: 10000 });
    const m = { group, id: r.member_id, epoch: r.member_epoch, positions: undefined, read: 0, stopped: false };
    state.members.push(m);
    logEvent(`joined group ${group} as ${m.id.slice(0, 12)}`, 'ok');
    renderMembers();
    runMember(m);
  } catch (e) {
    logEvent(`join ${group} refused: ${e.message}`, 'err');
  }
}

// runMember fetches for one member until it leaves: each fetch is its
// heartbeat; what it read is committed.
async function runMember(m) {
  const base = `/v1/groups/${encodeURIComponent(m.group)}`;
  while (!m.stopped) {
    try {
      const body = { member_epoch: m.epoch, max_wait_ms: 1000, max_records: 100 };
      if (m.positions) body.positions = m.positions;
      const r = await api('POST', `${base}/members/${encodeURIComponent(m.id)}/records`, body);
      if (m.stopped) break;
      m.epoch = r.member_epoch;
      m.positions = r.positions;
      const n = (r.records || []).length;
      if (n > 0 && m.positions && m.positions.length) {
        m.read += n;
        await api('POST', `${base}/offsets`, {
          member_id: m.id, member_epoch: m.epoch,
          offsets: m.positions.map((p) => ({ topic: p.topic, partition: p.partition, offset: p.offset })),
        }).catch((e) => logEvent(`${m.group}: commit refused: ${e.message}`, 'err'));
      }
      renderMembers();
    } catch (e) {
      if (m.stopped) break;
      logEvent(`${m.group}: member ${m.id.slice(0, 12)} stopped: ${e.message}`, 'err');
      m.stopped = true;
      state.members = state.members.filter((x) => x !== m);
      renderMembers();
      return;
    }
  }
}

async function leave(m) {
  m.stopped = true;
  state.members = state.members.filter((x) => x !== m);
  renderMembers();
  try {
    await api('DELETE', `/v1/groups/${encodeURIComponent(m.group)}/members/${encodeURIComponent(m.id)}`);
    logEvent(`member ${m.id.slice(0, 12)} left ${m.group}`);
  } catch (e) {
    logEvent(`leave ${m.group} refused: ${e.message}`, 'err');
  }
}

// ---- start ----

document.getElementById('create-topic').addEventListener('submit', createTopic);
document.getElementById('join-group').addEventListener('submit', join);
document.getElementById('show-internal').addEventListener('change', renderTopics);
document.getElementById('audit').addEventListener('click', audit);
for (const b of document.querySelectorAll('button.acks')) {
  b.addEventListener('click', () => produce(Number(b.dataset.acks)));
}
window.addEventListener('pagehide', () => {
  for (const m of state.members) {
    m.stopped = true;
    fetch(`/v1/groups/${encodeURIComponent(m.group)}/members/${encodeURIComponent(m.id)}`, { method: 'DELETE', keepalive: true }).catch(() => {});
  }
});
refreshDemo();
connect();
