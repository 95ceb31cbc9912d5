'use strict';
// V8's sampling profilers through the in-process inspector.
//
// CPU/wall: one V8 CPU profile runs at a time, restarted once per period
// (just after the core cuts it) with overlapping titles (start the next,
// then end the last), which costs < 1 ms where a stop + start re-logs
// every function (~100 ms). Each
// finished profile is flattened and handed to the addon, which joins its
// samples to the SIGPROF brackets and records them (join.c).
// Heap: V8's sampling heap profiler; a snapshot of its live samples is
// recorded once per store period (heap.c), taken fresh as often as the
// full GC each one forces fits a budget (heapFreshDue).
//
// Each JS thread (main or worker) that profiles runs this module in its own
// isolate: its own inspector session and V8 profile, joined to its own
// SIGPROF ring into the process's drivers (join.c), its samples labelled
// thread_name (threadLabel()).
const path = require('path');
const { pathToFileURL } = require('url');
const workerThreads = require('worker_threads');
const addon = require('./addon');

// This thread's thread_name: "main", or a worker's name option (Node's
// worker_threads.threadName where it has one) else "worker-<threadId>".
function threadLabel() {
  if (workerThreads.isMainThread) return 'main';
  const n = workerThreads.threadName;
  if (typeof n === 'string' && n && n !== 'WorkerThread') return n;
  return 'worker-' + workerThreads.threadId;
}

// For a thread that joined another's agent, at a profile restart: fn('gone') (once)
// when that agent stopped, or another started in its place (index.js stops or
// re-joins); fn('owner') when the agent's owner handed it to this thread.
let onStale = null;
function setStaleHandler(fn) {
  onStale = fn;
}

// Frames of this package's own JS (labels.run's wrapper, ...) are left out
// of stacks: they are the profiler, not the application.
const OWN_DIR = path.join(__dirname, path.sep);
const OWN_URL = pathToFileURL(OWN_DIR).href;
function own(url) {
  return url.startsWith(OWN_URL) || url.startsWith(OWN_DIR);
}

function synthetic(cf) {
  return (cf.functionName === '(root)' && !cf.url) || own(cf.url);
}

// node:inspector is loaded when a profiler starts (it costs memory).
let inspector = null;
let session = null;
let profiling = false; // a V8 CPU profile is running
let title = 0;
let rotateTimer = null;
let heapTimer = null;
const kinds = { cpu: null, wall: null }; // options of each running kind
let heapOpts = null;
let intervalMicros = 0;
let collectCpuTime = false;

// Milliseconds spent (on the JS thread, wall clock) in each step of the
// profile restarts, and how often: a cost breakdown for bench/node
// (heap_cpu_ms: the fresh snapshots' process CPU, all threads). Owned
// by the JS thread like everything here.
const costs = { rotations: 0, rotate_ms: 0, profile_end_ms: 0, flatten_ms: 0, join_ms: 0,
                heap_snapshots: 0, heap_replays: 0, heap_ms: 0, heap_cpu_ms: 0, samples: 0, nodes: 0 };
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

function post(method, params) {
  let err = null;
  let res;
  session.post(method, params || {}, (e, r) => { err = e; res = r; });
  if (err) throw new Error('pyroscope-native: inspector ' + method + ': ' + err.message);
  return res; // in-process sessions answer synchronously
}

function ensureSession() {
  if (session) return;
  if (!inspector) inspector = require('inspector');
  session = new inspector.Session();
  session.connect();
  session.on('Profiler.consoleProfileFinished', (m) => {
    if (!m.params.title.startsWith('pyroscope-')) return;
    try {
      recordCpu(m.params.profile);
    } catch (e) {
      addon.log(40, 'recording a V8 profile failed: ' + (e && e.stack || e));
    }
  });
}

function closeSessionIfIdle() {
  if (session && !profiling && !heapOpts) {
    session.disconnect();
    session = null;
  }
}

// Frames of a profile's nodes through mapFrame (once per distinct frame).
// mapFrame results by V8 frame, kept across profiles (a restart every few
// seconds would otherwise map every frame again), per mapFrame function.
const MAPPED_MAX = 50000;
const mappedBy = new WeakMap();

function mapped(mapFrame, key, f) {
  let m = mappedBy.get(mapFrame);
  if (!m || m.size >= MAPPED_MAX) {
    m = new Map();
    mappedBy.set(mapFrame, m);
  }
  let r = m.get(key);
  if (r === undefined) {
    r = f;
    try {
      const out = mapFrame(f);
      if (out) r = { name: String(out.name || f.name), file: String(out.file || ''), line: out.line | 0 };
    } catch (_) { /* keep the V8 frame */ }
    m.set(key, r);
  }
  return r;
}

function frameTable(mapFrame) {
  const names = [];
  const files = [];
  const lines = [];
  const index = new Map();
  return {
    names, files, lines,
    add(cf) {
      const key = cf.functionName + '\0' + cf.url + '\0' + cf.lineNumber + '\0' + cf.columnNumber;
      let i = index.get(key);
      if (i !== undefined) return i;
      let f = {
        name: cf.functionName || '(anonymous)',
        file: cf.url || '',
        line: cf.lineNumber >= 0 ? cf.lineNumber + 1 : 0,
        column: cf.columnNumber >= 0 ? cf.columnNumber + 1 : 0,
      };
      if (mapFrame) f = mapped(mapFrame, key, f);
      i = names.length;
      names.push(f.name);
      files.push(f.file);
      lines.push(f.line);
      index.set(key, i);
      return i;
    },
  };
}

function mapFrameOf() {
  return (kinds.cpu && kinds.cpu.mapFrame) || (kinds.wall && kinds.wall.mapFrame) || null;
}

function recordCpu(profile) {
  const t0 = nowMs();
  const nodes = profile.nodes;
  const n = nodes.length;
  const pos = new Map();
  for (let i = 0; i < n; i++) pos.set(nodes[i].id, i);
  const ft = frameTable(mapFrameOf());
  const nodeFrame = new Int32Array(n);
  const nodeParent = new Int32Array(n).fill(-1);
  let idleFrame = -1; // the event loop waiting: never labelled
  for (let i = 0; i < n; i++) {
    const nd = nodes[i];
    nodeFrame[i] = synthetic(nd.callFrame) ? -1 : ft.add(nd.callFrame);
    if (nd.callFrame.functionName === '(idle)' && !nd.callFrame.url) idleFrame = nodeFrame[i];
    if (nd.children) for (const c of nd.children) { const j = pos.get(c); if (j !== undefined) nodeParent[j] = i; }
  }
  const samples = profile.samples || [];
  const deltas = profile.timeDeltas || [];
  const sampleNode = new Int32Array(samples.length);
  const sampleTime = new Float64Array(samples.length);
  let t = profile.startTime;
  for (let i = 0; i < samples.length; i++) {
    t += deltas[i] || 0;
    const j = pos.get(samples[i]);
    sampleNode[i] = j === undefined ? -1 : j;
    sampleTime[i] = t;
  }
  const t1 = nowMs();
  addon.joinProfile(ft.names, ft.files, Int32Array.from(ft.lines), nodeFrame, nodeParent,
    sampleNode, sampleTime, profile.endTime, idleFrame);
  costs.flatten_ms += t1 - t0;
  costs.join_ms += nowMs() - t1;
  costs.samples += samples.length;
  costs.nodes += n;
}

function rotate() {
  if (!profiling) return;
  const t0 = nowMs();
  const last = 'pyroscope-' + title;
  title++;
  inspector.console.profile('pyroscope-' + title);
  inspector.console.profileEnd(last); // the finished profile is recorded now
  costs.profile_end_ms += nowMs() - t0;
  addon.signalArm(0); // back in front if V8 put its handler back
  heapSnapshotIfWanted();
  costs.rotations++;
  costs.rotate_ms += nowMs() - t0;
}

// When to restart. A cut period is sealed once a restart brings samples
// past its end (the join's watermark trails a profile's end by 50 ms), so
// the restart comes CUT_LAG_MS after each cut of the core's grid (every
// upload interval from the agent's start): one restart per period, each
// ~1-2 ms of the JS thread (costs()), where a restart every 2 s took 2.5
// per 5 s period. A long period also gets restarts in between, so the
// SIGPROF brackets waiting in the ring (and the label sets they hold) span
// at most MAX_GAP_MS. Should the core's flusher thread start its grid more
// than CUT_LAG_MS - 50 ms late, a period waits for the next restart (within
// the 15 s a cut period waits, agent.c), not longer.
const CUT_LAG_MS = 100;
const MAX_GAP_MS = 10000;
function uploadMs() {
  const c = addon.config();
  return c ? c.uploadInterval * 1000 : 10000;
}

// ms to the next restart, given the period and the ms to the next cut's
// restart point (in (0, upload]): that point, or one of the evenly spaced
// ones before it when the period is longer than MAX_GAP_MS.
function rotateDelay(upload, toCut) {
  const step = upload / Math.ceil(upload / MAX_GAP_MS);
  const ms = toCut % step;
  return ms < 1 ? ms + step : ms;
}

function nextRotateMs() {
  // no agent (another thread stopped the one this thread's profile fed):
  // the next restart tells (onStale) soon
  if (!addon.config()) return 1000;
  const upload = uploadMs();
  return rotateDelay(upload, addon.joinNextCutMs(upload, Math.min(CUT_LAG_MS, upload / 2)));
}

function scheduleRotate() {
  rotateTimer = setTimeout(() => {
    rotateTimer = null;
    try {
      rotate();
      if (profiling && onStale && !addon.joinCurrent()) {
        onStale('gone');
        return;
      }
      if (profiling && onStale && addon.agentOwned()) onStale('owner');
    } catch (e) {
      addon.log(40, 'restarting the V8 profile failed: ' + (e && e.stack || e));
    }
    if (profiling && !rotateTimer) scheduleRotate();
  }, nextRotateMs());
  rotateTimer.unref();
}

function startCpu(kind, opts) {
  const c = addon.config();
  const rate = c ? c.sampleRate : 100;
  const wantMicros = opts.samplingIntervalMicros > 0 ? Math.round(opts.samplingIntervalMicros)
    : Math.max(1, Math.round(1e6 / rate));
  if (opts.samplingIntervalMicros > 0 && Math.abs(wantMicros - 1e6 / rate) > 1e4 / rate) {
    addon.log(30, kind + ' profiler: samplingIntervalMicros ' + wantMicros + ' is not 1e6 / ' +
      'sample_rate (' + rate + ' Hz): uploads say sampleRate=' + Math.round(rate) +
      '; pass sample_rate = 1e6 / samplingIntervalMicros to start()');
  }
  ensureSession();
  addon.threadName(threadLabel());
  if (profiling && kinds[kind]) return;
  if (profiling && wantMicros !== intervalMicros) {
    addon.log(30, kind + ' profiler: samplingIntervalMicros ' + wantMicros + ' differs from the ' +
      'running profile\'s ' + intervalMicros + '; keeping ' + intervalMicros);
  }
  kinds[kind] = opts;
  if (kind === 'wall' && opts.collectCpuTime) collectCpuTime = true;
  if (!profiling) intervalMicros = wantMicros;
  else rotate(); // what ran so far goes to the drivers it was meant for
  addon.joinStart(!!kinds.cpu, !!kinds.wall, collectCpuTime, intervalMicros);
  if (!profiling) {
    post('Profiler.enable');
    post('Profiler.setSamplingInterval', { interval: intervalMicros });
    title++;
    inspector.console.profile('pyroscope-' + title);
    profiling = true;
    // Brackets wait in the ring until the next restart (MAX_GAP_MS at
    // most), which a blocked event loop delays: room for that and the 15 s
    // a cut period waits (agent.c).
    addon.signalArm(Math.ceil((MAX_GAP_MS + 16000) * 1000 / intervalMicros) + 1024);
    scheduleRotate();
  }
}

function stopCpu(kind) {
  if (!kinds[kind]) return;
  if (profiling) rotate();
  const last = !kinds[kind === 'cpu' ? 'wall' : 'cpu'];
  if (last) {
    clearTimeout(rotateTimer);
    rotateTimer = null;
    profiling = false;
    // Recorded now, while kinds[kind] still gives its frames their mapper
    // (source maps, stripFilenames): what ran since rotate() above (its
    // own recording, for one) would otherwise keep V8's raw file names.
    inspector.console.profileEnd('pyroscope-' + title);
  }
  kinds[kind] = null;
  if (kind === 'wall') collectCpuTime = false;
  if (!last) {
    addon.joinStart(!!kinds.cpu, !!kinds.wall, collectCpuTime, intervalMicros);
    return;
  }
  addon.signalDisarm();
  addon.joinStop();
  try { post('Profiler.disable'); } catch (_) { /* closing anyway */ }
  closeSessionIfIdle();
}

// ---- heap

// A V8 sampling heap profile, flattened -> heapRecord's arguments. In-use (the
// inspector's): objects per node are its sampled allocations (the inspector reports
// each sample's size already scaled to the allocations it stands for, but not the
// object size, so the object count cannot be scaled the same way). Allocations
// (v8.startHeapProfile's, Node 26): V8's scaled objectCount and size of every sample.
function flattenHeapProfile(profile, alloc) {
  const ft = frameTable(heapOpts.mapFrame);
  const nodes = [];
  const parents = [];
  const stack = [[profile.head, -1]];
  while (stack.length) {
    const [nd, parent] = stack.pop();
    const i = nodes.length;
    nodes.push(nd);
    parents.push(parent);
    if (nd.children) for (const c of nd.children) stack.push([c, i]);
  }
  const n = nodes.length;
  const pos = new Map();
  const nodeFrame = new Int32Array(n);
  const nodeParent = Int32Array.from(parents);
  const nodeBytes = new Float64Array(n);
  const nodeObjects = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const nd = nodes[i];
    pos.set(nd.id, i);
    nodeFrame[i] = synthetic(nd.callFrame) ? -1 : ft.add(nd.callFrame);
    if (!alloc) nodeBytes[i] = nd.selfSize || 0;
  }
  for (const s of profile.samples || []) {
    const i = pos.get(s.nodeId);
    if (i === undefined) continue;
    if (alloc) {
      nodeObjects[i] += s.objectCount || 1;
      nodeBytes[i] += s.size || 0;
    } else {
      nodeObjects[i] += 1;
    }
  }
  return [ft.names, ft.files, Int32Array.from(ft.lines), nodeFrame, nodeParent, nodeObjects, nodeBytes];
}

// A fresh in-use snapshot: V8's live samples.
function heapSnapshot() {
  return flattenHeapProfile(post('HeapProfiler.getSamplingProfile').profile, false);
}

// Allocations: Node 26's v8.startHeapProfile keeps the samples of collected objects
// (includeObjectsCollectedBy*GC) but gives its profile only when stopped, so each
// window ends with stop() and the next starts at once (~1 ms together, no forced GC);
// every sample of the window is an allocation of it. The window's samples go to the
// period current at its end (a window is at most the heap timer's interval long).
const v8mod = require('v8');
const ALLOC_CAPABLE = typeof v8mod.startHeapProfile === 'function';
let allocHandle = null;

function allocWindowStart() {
  allocHandle = v8mod.startHeapProfile({
    sampleInterval: heapOpts.samplingIntervalBytes, stackDepth: heapOpts.stackDepth,
    includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true,
  });
}

function allocWindow(restart) {
  const h = allocHandle;
  allocHandle = null;
  const json = h.stop();
  if (restart) allocWindowStart();
  costs.heap_snapshots++;
  addon.heapRecord(...flattenHeapProfile(JSON.parse(json), true));
}

// Each snapshot costs a full garbage collection: the inspector starts V8's
// sampling heap profiler with kSamplingForceGC, so getSamplingProfile
// collects the whole heap first, on the JS thread helped by V8's workers, in
// time that grows with the live heap (~4 ms of the JS thread, 6-7 ms of the
// process's CPU for bench/node; far more for a large service).
// startSampling's includeObjectsCollectedByMajorGC/MinorGC flags do not
// avoid it (Node 20: 5 getSamplingProfile calls, 5 major GCs, with or
// without them). After it V8 also optimises hot functions again on its
// workers (--trace-opt: the async-hook paths and the handlers; perf: ~20 ms
// of compiler threads per snapshot in bench/node), which no clock around
// the call sees. So a fresh snapshot is taken when its process CPU (all
// threads: process.cpuUsage, the GC's parallel helpers included), spread
// over the time since the last one, is within HEAP_BUDGET of one core, and
// at least every HEAP_STALE_MS; a period in between records the last
// snapshot again, so every period still has its heap profile, at most that
// old. 0.01 %: bench/node's ~6.5 ms snapshot is fresh every ~65 s, where
// 0.05 % of the JS thread's ~4 ms (one every other 5 s period) cost about
// 1.8 % of the work per window with the recompiles (bench/node's `rare` A/B,
// docs/benchmarks.md).
const HEAP_BUDGET_DEFAULT = 0.0001;
const HEAP_STALE_MS_DEFAULT = 300000;
let HEAP_BUDGET = HEAP_BUDGET_DEFAULT;
let HEAP_STALE_MS = HEAP_STALE_MS_DEFAULT;
let heapLast = null; // { args, at, ms }: the last fresh snapshot, ms of process CPU (JS thread)

// Tests set other bounds (budget, staleMs); no arguments: the defaults.
function heapBudget(budget, staleMs) {
  HEAP_BUDGET = budget === undefined ? HEAP_BUDGET_DEFAULT : budget;
  HEAP_STALE_MS = staleMs === undefined ? HEAP_STALE_MS_DEFAULT : staleMs;
}

function heapFreshDue(last, now) {
  if (!last) return true;
  const age = now - last.at;
  return age >= HEAP_STALE_MS || last.ms <= age * HEAP_BUDGET;
}

// ms of CPU, all of the process's threads
function processCpuMs() {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1000;
}

function heapSnapshotIfWanted(last) {
  if (!heapOpts || !addon.heapWanted()) return;
  const t0 = nowMs();
  try {
    if (heapOpts.allocations) {
      if (allocHandle) allocWindow(!last);
    } else if (heapFreshDue(heapLast, t0)) {
      const cpu0 = processCpuMs();
      const args = heapSnapshot();
      heapLast = { args, at: t0, ms: processCpuMs() - cpu0 };
      costs.heap_snapshots++;
      costs.heap_cpu_ms += heapLast.ms;
      addon.heapRecord(...args);
    } else {
      costs.heap_replays++;
      addon.heapRecord(...heapLast.args);
    }
  } catch (e) {
    addon.log(40, 'recording a heap profile failed: ' + (e && e.stack || e));
  }
  costs.heap_ms += nowMs() - t0;
}

function startHeap(opts) {
  if (heapOpts) return;
  const bytes = opts.samplingIntervalBytes > 0 ? Math.round(opts.samplingIntervalBytes) : 524288;
  const depth = opts.stackDepth > 0 ? Math.round(opts.stackDepth) : 64;
  const alloc = Boolean(opts.allocations) && ALLOC_CAPABLE;
  addon.heapStart(bytes, depth, alloc);
  heapOpts = Object.assign({}, opts, { samplingIntervalBytes: bytes, stackDepth: depth,
    allocations: alloc });
  if (alloc) {
    allocWindowStart();
  } else {
    ensureSession();
    post('HeapProfiler.enable');
    post('HeapProfiler.startSampling', { samplingInterval: bytes });
  }
  heapTimer = setInterval(heapSnapshotIfWanted, Math.max(50, Math.min(2000, uploadMs() / 2)));
  heapTimer.unref();
}

function stopHeap() {
  if (!heapOpts) return;
  heapSnapshotIfWanted(true);
  clearInterval(heapTimer);
  heapTimer = null;
  try {
    if (allocHandle) allocHandle.stop();
    else if (session) {
      post('HeapProfiler.stopSampling');
      post('HeapProfiler.disable');
    }
  } catch (_) { /* closing anyway */ }
  allocHandle = null;
  heapOpts = null;
  heapLast = null;
  addon.heapStop();
  closeSessionIfIdle();
}

// Everything sampled so far reaches the drivers (before a flush).
function sync() {
  if (profiling) rotate();
  else heapSnapshotIfWanted();
}

// The same a moment from now: past the watermark's lag (join.c), so a
// period cut now can be sealed.
function syncSoon() {
  setTimeout(() => {
    try {
      sync();
    } catch (e) {
      addon.log(40, 'restarting the V8 profile failed: ' + (e && e.stack || e));
    }
  }, 80).unref();
}

function start(kind, opts) {
  if (kind === 'heap') startHeap(opts || {});
  else startCpu(kind, opts || {});
}

function stop(kind) {
  if (kind === 'heap') stopHeap();
  else stopCpu(kind);
}

function stopAll() {
  stopCpu('cpu');
  stopCpu('wall');
  stopHeap();
}

function running(kind) {
  return kind === 'heap' ? !!heapOpts : !!kinds[kind];
}

// Whether `heap.allocations` can be had: Node 26's v8.startHeapProfile.
const allocationsSupported = () => ALLOC_CAPABLE;

module.exports = { start, stop, stopAll, sync, syncSoon, running, costs: () => Object.assign({}, costs),
  heapFreshDue, heapBudget, rotateDelay, allocationsSupported, setStaleHandler, threadLabel };
