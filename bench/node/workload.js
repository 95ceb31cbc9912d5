'use strict';
// The profiled side of the Node benchmark: one workload per process.
//
//   node workload.js --profiler none|v8floor|v8labels|native|native-wall|native-libcurl|anchor --app NAME --server URL [options]
//
// run.js starts one of these per round and variant. The exchange is line
// based, so the measured window holds neither Node's start-up nor the
// profiler's start:
//
//   child  -> BENCH {"event":"ready"}     warmed up, profiler running
//   parent -> go                          (the child warms up once more with
//                                          the profiler on, then measures)
//   child  -> BENCH {"event":"result"}    CPU, wall, memory of the window
//   child  -> BENCH {"event":"final"}     after the profiler's stop() resolved
//
// With --interleave the child measures one window per `window` line after
// its warm-up (`warm` event), until `end`; run.js then keeps every
// variant's process alive and runs their windows in turn:
//
//   parent -> go / child -> BENCH {"event":"warm"}
//   parent -> window / child -> BENCH {"event":"result"}   (repeated)
//   parent -> end / child -> BENCH {"event":"final"}
//
// The workload is a small service: `--concurrency` request loops, each
// request wrapped with wrapWithLabels({endpoint}) and running an async
// handler that burns CPU in `<endpoint>BeforeAwait`, awaits one macrotask
// (as an I/O callback would), then burns CPU in `<endpoint>AfterAwait`. Two
// endpoints run interleaved, so a sample after the `await` is labelled right
// only if the label follows the async context, not the thread.
//
// `native` is this project's package as a user installs it (the repository
// root), `anchor` is @pyroscope/nodejs from bench/node/node_modules, and
// `v8floor` is only V8's own profilers through node:inspector (see
// v8Floor below): what any design over V8's CPU profiler pays. Both
// get the same settings through the API they share: init() with defaults
// everywhere but the flush interval (so a round holds several periods),
// then start().

const fs = require('node:fs');
const path = require('node:path');
const { parseArgs } = require('node:util');

const { values: args } = parseArgs({
  options: {
    profiler: { type: 'string', default: 'none' },
    root: { type: 'string', default: '' }, // another checkout as `native` (an A/B of two builds)
    interleave: { type: 'boolean', default: false }, // windows on request (see the header)
    app: { type: 'string', default: 'bench.node' },
    server: { type: 'string', default: '' },
    'flush-ms': { type: 'string', default: '5000' },
    requests: { type: 'string', default: '400' },
    concurrency: { type: 'string', default: '2' },
    iters: { type: 'string', default: '200000' },
    'warm-profiled-ms': { type: 'string', default: '' }, // default: flush-ms + 1000
    'announce-window': { type: 'boolean', default: false }, // a `window` event first (perf.js)
  },
});

const ROOT = args.root ? path.resolve(args.root) : path.resolve(__dirname, '..', '..');
const REQUESTS = Number(args.requests);
const CONCURRENCY = Number(args.concurrency);
const ITERS = Number(args.iters);

function emit(event, fields = {}) {
  process.stdout.write('BENCH ' + JSON.stringify({ event, ...fields }) + '\n');
}

// ------------------------------------------------------------------ memory

function smapsRollupKiB() {
  const out = { Rss: 0, Pss: 0, Private_Clean: 0, Private_Dirty: 0 };
  for (const line of fs.readFileSync('/proc/self/smaps_rollup', 'utf8').split('\n')) {
    const m = /^(\w+):\s+(\d+) kB/.exec(line);
    if (m && m[1] in out) out[m[1]] = Number(m[2]);
  }
  return { rss_kib: out.Rss, pss_kib: out.Pss,
           private_kib: out.Private_Clean + out.Private_Dirty };
}

function statusKiB(key) {
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm')
    .exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : null;
}

// CPU seconds per thread name (comm), from /proc/self/task/*: shows where a
// profiler's cost lands (main thread, V8's threads, ours). The scheduler's
// se.sum_exec_runtime (sched, nanoseconds) where the kernel has it, else
// utime + stime (stat, in 10 ms ticks: too coarse for a few ms of ours).
function taskCpuS(tid) {
  try {
    const m = /^se\.sum_exec_runtime\s*:\s*([\d.]+)/m
      .exec(fs.readFileSync(`/proc/self/task/${tid}/sched`, 'utf8'));
    if (m) return Number(m[1]) / 1e3; // milliseconds
  } catch { /* no sched file: stat below */ }
  const stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // USER_HZ
}

function threadCpuByName() {
  const out = {};
  let tasks = [];
  try { tasks = fs.readdirSync('/proc/self/task'); } catch { return out; }
  for (const tid of tasks) {
    let name;
    let cpu;
    try {
      name = tid === String(process.pid) ? 'main'
        : fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
      cpu = taskCpuS(tid);
    } catch { continue; } // the thread ended meanwhile
    out[name] = (out[name] || 0) + cpu;
  }
  return out;
}

function diffByName(a, b) {
  const out = {};
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
    out[k] = +((b[k] || 0) - (a[k] || 0)).toFixed(6);
  }
  return out;
}

// ---------------------------------------------------------------- profilers

// The floor of a V8-profiler-based design: the CPU profiler at 100 Hz and
// the sampling heap profiler at 512 KiB (both profilers' defaults), one
// profile for the whole window, nothing read or processed until stop().
// Shaped like the packages' API so the workload drives it the same way.
function v8Floor() {
  const inspector = require('node:inspector');
  let session = null;
  const post = (method, params) => session.post(method, params || {}, (err) => {
    if (err) throw new Error(`v8floor: ${method}: ${err.message}`);
  });
  return {
    init() {},
    start() {
      session = new inspector.Session();
      session.connect();
      post('Profiler.enable');
      post('Profiler.setSamplingInterval', { interval: 10000 });
      post('Profiler.start');
      post('HeapProfiler.enable');
      post('HeapProfiler.startSampling', { samplingInterval: 524288 });
    },
    wrapWithLabels(_labels, fn) { fn(); },
    async stop() {
      post('Profiler.stop');
      post('HeapProfiler.stopSampling');
      session.disconnect();
    },
  };
}

// The floor plus the least that labels across `await` cost on Node 20: an
// AsyncLocalStorage holding each request's label set and an async_hooks
// `before` hook publishing the resumed context's set into a typed array
// (where a signal handler would read it), as ours does; no addon, no
// label interning, nothing recorded.
function v8Labels() {
  const { AsyncLocalStorage, createHook } = require('node:async_hooks');
  const floor = v8Floor();
  const als = new AsyncLocalStorage();
  const slot = new Int32Array(2);
  const sets = new Map(); // endpoint -> { id }
  const hook = createHook({ before() { const s = als.getStore(); slot[0] = s ? s.id : 0; } });
  return {
    init() {},
    start() { floor.start(); hook.enable(); },
    wrapWithLabels(labels, fn) {
      let s = sets.get(labels.endpoint);
      if (!s) sets.set(labels.endpoint, s = { id: sets.size + 1 });
      als.run(s, () => {
        const p0 = slot[0];
        slot[0] = s.id;
        try { fn(); } finally { slot[0] = p0; }
      });
    },
    async stop() { hook.disable(); await floor.stop(); },
  };
}

function loadProfiler() {
  if (args.profiler === 'none') return null;
  if (args.profiler === 'v8floor') return v8Floor();
  if (args.profiler === 'v8labels') return v8Labels();
  if (args.profiler === 'native' || args.profiler === 'native-wall') return require(ROOT);
  if (args.profiler === 'native-libcurl') {
    require(path.join(ROOT, 'bindings', 'node', 'lib', 'native')).setUploadClient('libcurl');
    return require(ROOT);
  }
  if (args.profiler === 'anchor') {
    const mod = require('@pyroscope/nodejs');
    return mod.default || mod;
  }
  throw new Error(`--profiler: unknown '${args.profiler}' (none, v8floor, v8labels, native, native-wall, native-libcurl, anchor)`);
}

// Ours: the JS-thread time of its profile restarts by step (sampler.js),
// over the window (a delta from `since`).
function samplerCosts(since) {
  if (!args.profiler.startsWith('native')) return null;
  const now = require(path.join(ROOT, 'bindings', 'node', 'lib', 'sampler.js')).costs();
  if (!since) return now;
  const out = {};
  for (const k of Object.keys(now)) out[k] = +(now[k] - since[k]).toFixed(3);
  return out;
}

// Garbage collections and their time by kind over the window, from
// perf_hooks' gc entries: shows whether a profiler's garbage costs GC.
const { PerformanceObserver, constants: perfConst } = require('node:perf_hooks');
const gcSeen = { minor: 0, major: 0, other: 0, minor_ms: 0, major_ms: 0, other_ms: 0 };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const k = e.detail && e.detail.kind === perfConst.NODE_PERFORMANCE_GC_MINOR ? 'minor'
      : e.detail && e.detail.kind === perfConst.NODE_PERFORMANCE_GC_MAJOR ? 'major' : 'other';
    gcSeen[k]++;
    gcSeen[k + '_ms'] += e.duration;
  }
}).observe({ entryTypes: ['gc'] });
function gcCounts(since) {
  const out = {};
  for (const k of Object.keys(gcSeen)) out[k] = +(gcSeen[k] - (since ? since[k] : 0)).toFixed(2);
  return out;
}

// Loaded after the warm-up, so the memory the package costs before it
// profiles anything (addon, libraries, JS) shows on its own.
let Pyroscope = null;

async function stopProfiler() {
  if (Pyroscope) await Pyroscope.stop();
}

// ----------------------------------------------------------------- workload

// Deterministic CPU work the optimiser cannot drop.
function burn(n, seed) {
  let h = seed | 0;
  for (let i = 0; i < n; i++) h = Math.imul(h ^ i, 0x9e3779b1) + (h >>> 13);
  return h;
}

// One pair of functions per endpoint, so a decoded stack says which handler
// and which side of the `await` a sample is from.
function checkoutBeforeAwait(n) { return burn(n, 1); }
function checkoutAfterAwait(n) { return burn(n, 2); }
function cartBeforeAwait(n) { return burn(n, 3); }
function cartAfterAwait(n) { return burn(n, 4); }

const HANDLERS = {
  '/checkout': { before: checkoutBeforeAwait, after: checkoutAfterAwait },
  '/cart': { before: cartBeforeAwait, after: cartAfterAwait },
};

const macrotask = () => new Promise((resolve) => setImmediate(resolve));

let sink = 0;

async function handle(endpoint, iters) {
  const h = HANDLERS[endpoint];
  sink = (sink + h.before(iters)) | 0;
  await macrotask();
  sink = (sink + h.after(iters)) | 0;
}

// The anchor's wrapWithLabels drops fn's return value, so completion comes
// back through a promise made here, the same for every profiler.
function request(endpoint, iters, labelled) {
  return new Promise((resolve, reject) => {
    const fn = () => handle(endpoint, iters).then(resolve, reject);
    if (labelled) Pyroscope.wrapWithLabels({ endpoint }, fn);
    else fn();
  });
}

async function serve(requests, iters, labelled) {
  let next = 0;
  const loop = async (worker) => {
    while (next < requests) {
      next++;
      await request(worker % 2 === 0 ? '/checkout' : '/cart', iters, labelled);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, (_, w) => loop(w)));
}

// The parent's commands, one a line.
const lines = [];
let lineWaiter = null;
let stdinEnded = false;
function nextLine() {
  if (lines.length) return Promise.resolve(lines.shift());
  if (stdinEnded) return Promise.reject(new Error('stdin closed'));
  return new Promise((resolve, reject) => { lineWaiter = { resolve, reject }; });
}
function listen() {
  let buf = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      lines.push(buf.slice(0, i).trim());
      buf = buf.slice(i + 1);
    }
    if (lineWaiter && lines.length) {
      const w = lineWaiter;
      lineWaiter = null;
      w.resolve(lines.shift());
    }
  });
  process.stdin.once('end', () => {
    stdinEnded = true;
    if (lineWaiter) lineWaiter.reject(new Error('stdin closed'));
  });
}

async function waitForLine(expected) {
  for (;;) if ((await nextLine()) === expected) return;
}

// One measured window: CPU (the process's and per thread), wall, memory.
async function measure() {
  const threads0 = threadCpuByName();
  const costs0 = samplerCosts(null);
  const gc0 = gcCounts(null);
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await serve(REQUESTS, ITERS, Pyroscope !== null);
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  return {
    wall_s: wall,
    cpu_s: (cpu.user + cpu.system) / 1e6,
    thread_cpu_s: diffByName(threads0, threadCpuByName()),
    ...smapsRollupKiB(),
    hwm_kib: statusKiB('VmHWM'),
    sampler_costs: samplerCosts(costs0),
    gc: gcCounts(gc0),
    sink,
  };
}

async function main() {
  // Warm up the JIT before the profiler starts: V8 logs compiled code
  // when profiling starts, as it would in a service that has run a while.
  await serve(20, ITERS, false);
  const beforeLoad = smapsRollupKiB();
  Pyroscope = loadProfiler();
  if (Pyroscope) {
    const settings = {
      appName: args.app,
      serverAddress: args.server,
      flushIntervalMs: Number(args['flush-ms']),
    };
    // Wall-clock time, as the anchor samples: the like-for-like comparison.
    if (args.profiler === 'native-wall') settings.oncpu = false;
    Pyroscope.init(settings);
  }
  const loaded = smapsRollupKiB();
  if (Pyroscope) Pyroscope.start();
  // The handshake before the profiled warm-up: reading stdin brings new
  // async resource types too (see below).
  listen();
  emit('ready', { pid: process.pid, node: process.version });
  await waitForLine('go');
  // Warm up again with the profiler running, so the window measures its
  // steady cost as in a service that has run a while: the first requests
  // after start() compile the profiler's own hot paths and, with
  // AsyncLocalStorage, Node's async_hooks and promise hooks; the first
  // timer, restart and period each bring objects of a new shape to those
  // paths, which deoptimises and compiles them again (~0.1 s of TurboFan
  // on V8's threads in all, once per process). So this lasts a period and
  // a second, in batches of 20 requests.
  const warmMs = args['warm-profiled-ms'] !== '' ? Number(args['warm-profiled-ms'])
    : Number(args['flush-ms']) + 1000;
  const cpuWarm0 = process.cpuUsage();
  const threadsWarm0 = threadCpuByName();
  const warmEnd = Date.now() + warmMs;
  while (Date.now() < warmEnd) await serve(20, ITERS, Pyroscope !== null);
  const warmCpu = process.cpuUsage(cpuWarm0);
  const warm = { cpu_s: (warmCpu.user + warmCpu.system) / 1e6,
                 thread_cpu_s: diffByName(threadsWarm0, threadCpuByName()) };

  // What loading the package and init() added, before start().
  const load = { load_rss_kib: loaded.rss_kib - beforeLoad.rss_kib,
                 load_pss_kib: loaded.pss_kib - beforeLoad.pss_kib,
                 load_private_kib: loaded.private_kib - beforeLoad.private_kib,
                 warm_after_start: warm };
  if (args.interleave) {
    emit('warm', {});
    for (let cmd = await nextLine(); cmd !== 'end'; cmd = await nextLine()) {
      if (cmd === 'window') emit('result', { ...(await measure()), ...load });
    }
  } else {
    if (args['announce-window']) emit('window', {});
    process.stdin.pause();
    emit('result', { ...(await measure()), ...load });
  }

  const s0 = process.hrtime.bigint();
  await stopProfiler();
  emit('final', { stop_s: Number(process.hrtime.bigint() - s0) / 1e9 });
}

main().catch((err) => {
  process.stderr.write(`workload: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
