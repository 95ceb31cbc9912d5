'use strict';
// pyroscope-native for Node.js: the API of @pyroscope/nodejs 0.6.4 (same export names,
// options and defaults, see docs/node.md for the differences) on the shared C core,
// plus PyroscopeSpanProcessor (OpenTelemetry) and flush().
//
//   const Pyroscope = require('pyroscope-native');
//   Pyroscope.init({ appName: 'my.app', serverAddress: 'http://pyroscope:4040' });
//   Pyroscope.start();
//   await Pyroscope.wrapWithLabels({ route: '/checkout' }, handler, req);
//
// Worker threads: each loads this module in its own isolate (its own state here); the
// native agent is the process's. The first thread whose start() finds none running
// starts it (and its stop() stops it; a worker's hands it to a thread still profiling
// into it, when there is one); any other thread's start() profiles that thread into the
// same agent, its samples labelled thread_name (see "Worker threads" in README.md). All state here belongs to this module's JS thread.

const config = require('./config');
const logger = require('./logger');
const { SourceMapper, frameMapper } = require('./sourcemapper');
const { PyroscopeSpanProcessor } = require('./otel'); // loads @opentelemetry/api when constructed
// The pull endpoints (node:zlib, pprof-format) are loaded when first used: a default
// start() does not need them.
let middlewareModule;

let nativeModule;
let nativeError; // why it cannot load here (kept: loading is not retried)
// Loaded on first use, so that requiring the package (for SourceMapper, types or the
// middleware) works where the addon cannot load (a worker thread, no build).
function native() {
  if (nativeModule) return nativeModule;
  if (nativeError) throw nativeError;
  try {
    nativeModule = require('./native');
  } catch (e) {
    nativeError = e;
    throw e;
  }
  return nativeModule;
}

function labelsApi() {
  return native().labels;
}

const IN_WORKER = !require('worker_threads').isMainThread;

// This thread's part in the process's profiling (stats().thread). A worker's init(),
// start() and stop() never throw: what cannot work there is logged once and counted.
const threadStats = {
  name: undefined,        // its thread_name label
  role: null,             // 'owner': started the agent (or was handed it); 'joined':
                          // profiles into another's
  initErrors: 0,          // worker init() calls that failed (logged, not thrown)
  heapNotProfiled: 0,     // heap profiler starts skipped: only the owner profiles the heap
  agentGone: 0,           // the agent it joined stopped or was replaced
};
let exitHooked = false; // a joined thread's exit handler is installed
const loggedOnce = new Set();
function warnOnce(key, text) {
  if (loggedOnce.has(key)) return;
  loggedOnce.add(key);
  logger.warn(text);
}

// The configuration from init() and what runs. Main thread only.
const state = {
  resolved: undefined,   // config.resolveConfig() result
  mapFrame: undefined,   // frame mapper of the resolved config
  agent: false,          // native.start() done and not stopped
  profilers: new Set(),  // kinds started: 'cpu' | 'wall' | 'heap'
  stopping: undefined,   // the promise of a running stop()
  heapWanted: false,     // start() asked for the heap profile while joined (the owner's)
};

// The pull endpoints use init()'s rate, heap options and frame naming (defaults before).
let defaultMapFrame;
function middlewareOptions() {
  const r = state.resolved;
  if (!r && !defaultMapFrame) defaultMapFrame = frameMapper({});
  return {
    wall: { samplingIntervalMicros: 1e6 / Number((r && r.settings.sample_rate) || 100) },
    heap: r && r.heap,
    mapFrame: r ? state.mapFrame : defaultMapFrame,
    heapRunning: () => state.profilers.has('heap'),
  };
}

function middleware() {
  if (!middlewareModule) {
    middlewareModule = require('./middleware');
    middlewareModule.useOptions(middlewareOptions);
  }
  return middlewareModule;
}

function expressMiddleware(...args) {
  return middleware().expressMiddleware(...args);
}

function fastifyMiddleware(...args) {
  return middleware().fastifyMiddleware(...args);
}

function onNativeLog(level, message) {
  logger.log(level, message);
}

function init(options = {}) {
  if (!IN_WORKER) return initHere(options);
  try {
    return initHere(options);
  } catch (e) {
    threadStats.initErrors++;
    warnOnce('worker', 'init() in a worker thread failed; this worker is not profiled: ' +
      (e && e.message));
    return undefined;
  }
}

function initHere(options) {
  const n = native();
  if (state.agent || n.agentOwned()) {
    throw config.configError('init(): the profiler is running; call stop() (and await it) ' +
      'before init() with new options');
  }
  // the core's warnings about settings go to setLogger's logger (the main thread's: a
  // worker's native messages go to the main thread's handler, or stderr)
  n.setLogHandler(onNativeLog);
  const resolved = config.resolveConfig(options, process.env, n);
  for (const text of resolved.warnings) logger.warn(text);
  state.resolved = resolved;
  state.mapFrame = frameMapper(resolved.frames);
}

function requireInit(what) {
  if (!state.resolved) {
    throw new Error(`${what}: Pyroscope is not configured. Please call init() first.`);
  }
}

// The agent another thread started stopped, or another took its place: this thread's
// profiling ends; it joins again at its next start(), or now when an agent runs.
let rejoinTimer = null;
function onAgentGone() {
  threadStats.agentGone++;
  const kinds = [...state.profilers];
  state.profilers.clear();
  state.agent = false;
  threadStats.role = null;
  native().leave();
  const rejoin = () => {
    if (!native().running()) return false;
    try {
      for (const k of kinds) startKind(k, 'start');
    } catch (e) {
      warnOnce('rejoin', 'profiling this thread again failed: ' + (e && e.message));
    }
    return true;
  };
  // none runs now (its thread stopped it): join the next one, checked once a second
  if (!rejoin()) {
    rejoinTimer = setInterval(() => {
      if (rejoin()) stopRejoin();
    }, 1000);
    rejoinTimer.unref();
  }
}

function stopRejoin() {
  clearInterval(rejoinTimer);
  rejoinTimer = null;
}

// The owner of the agent this thread joined (a worker) stopped or ended and handed it
// to this thread: its stop() and exit stop it now, and it runs the heap profile if its
// start() asked for one.
function checkAdopted() {
  if (threadStats.role !== 'joined' || !nativeModule || !nativeModule.agentOwned()) return;
  threadStats.role = 'owner';
  nativeModule.setStaleHandler(null);
  nativeModule.adopt();
  if (!state.heapWanted) return;
  try {
    startKind('heap', 'startHeapProfiling');
  } catch (e) {
    warnOnce('adopt-heap', 'starting the heap profile failed: ' + (e && e.message));
  }
}

function onStale(why) {
  if (why === 'owner') checkAdopted();
  else onAgentGone();
}

// another thread's agent: its settings hold (this thread's init() options other than the
// profilers' are not applied), this thread's samples go into its profiles
function joinAgent(n) {
  state.agent = true;
  threadStats.role = 'joined';
  n.setStaleHandler(onStale);
  if (!exitHooked) {
    exitHooked = true;
    // the last samples of a thread that ends are recorded while it still can (it may own
    // the agent by now: handed over, not noticed yet)
    process.on('exit', () => {
      if (threadStats.role !== 'joined') return;
      if (n.agentOwned()) n.stopAtExit();
      else n.leave();
    });
  }
}

// Starts the agent (pipeline and exporters) on the first profiler start, or, when
// another thread runs it, profiles this thread into it.
function ensureAgent(what) {
  requireInit(what);
  if (state.stopping) {
    throw new Error(`${what}: stop() is still running; await it before starting again`);
  }
  const n = native();
  if (state.agent && n.running()) return checkAdopted();
  // (not running although started: the addon stopped it at beforeExit; start afresh)
  state.profilers.clear();
  threadStats.name = n.threadLabel();
  if (n.running() && !n.agentOwned()) return joinAgent(n);
  n.setStaleHandler(null);
  n.setLogHandler(onNativeLog);
  let role;
  try {
    // finds a running agent and starts one in one step: another thread's start() at the
    // same moment makes this one join it
    role = n.start(state.resolved.settings, state.resolved.env);
  } catch (e) {
    throw config.renameError(e, state.resolved.origins);
  }
  if (role === 'joined' && !n.agentOwned()) return joinAgent(n);
  state.agent = true;
  threadStats.role = 'owner';
}

function startKind(kind, what) {
  ensureAgent(what);
  if (state.profilers.has(kind)) return;
  if (kind === 'heap' && threadStats.role === 'joined') {
    // one heap profiler per process: the agent's owner runs it (told once a process)
    threadStats.heapNotProfiled++;
    state.heapWanted = true;
    native().heapNotOwnedWarn();
    return;
  }
  const r = state.resolved;
  const opts = kind === 'heap'
    ? { samplingIntervalBytes: r.heap.samplingIntervalBytes, stackDepth: r.heap.stackDepth,
      allocations: r.heap.allocations }
    : { collectCpuTime: kind === 'wall' && r.wall.collectCpuTime };
  opts.mapFrame = state.mapFrame;
  native().startProfiler(kind, opts);
  state.profilers.add(kind);
}

async function stopKind(kind) {
  if (!state.profilers.has(kind)) return;
  state.profilers.delete(kind);
  await native().stopProfiler(kind);
}

// The time profile start() runs: on-CPU unless `oncpu: false` (then wall clock).
function timeKind() {
  return state.resolved ? state.resolved.kind : 'cpu';
}

// In a worker, what cannot work there is logged once and counted, never thrown.
function guarded(what, fn) {
  if (!IN_WORKER) return fn();
  try {
    return fn();
  } catch (e) {
    threadStats.initErrors++;
    warnOnce('worker', what + '() in a worker thread failed; this worker is not profiled: ' +
      (e && e.message));
    return undefined;
  }
}

function startCpuProfiling() {
  guarded('startCpuProfiling', () => startKind(timeKind(), 'startCpuProfiling'));
}

async function stopCpuProfiling() {
  await stopKind(timeKind());
}

function startWallProfiling() {
  guarded('startWallProfiling', () => startKind('wall', 'startWallProfiling'));
}

async function stopWallProfiling() {
  await stopKind('wall');
}

function startHeapProfiling() {
  guarded('startHeapProfiling', () => startKind('heap', 'startHeapProfiling'));
}

async function stopHeapProfiling() {
  await stopKind('heap');
}

// The time profile, and the heap profile unless `memory` is false (@pyroscope/nodejs's
// start() ran both; `memory: true` or PYROSCOPE_MEMORY=true asks for it by the shared name).
function start() {
  startCpuProfiling();
  if (!state.resolved || state.resolved.memory !== false) startHeapProfiling();
}

// Stops every profiler and the agent; the last period is exported (within stopTimeout,
// even when the server is down). Resolves when done; safe to call when not running.
function stop() {
  stopRejoin(); // a thread waiting to join the next agent no longer does
  if (state.stopping) return state.stopping;
  state.heapWanted = false;
  if (!state.agent) return Promise.resolve();
  checkAdopted();
  if (threadStats.role === 'joined') {
    // the agent is another thread's: only this thread's profiling ends
    state.profilers.clear();
    state.agent = false;
    threadStats.role = null;
    native().setStaleHandler(null);
    native().leave();
    // handed the agent while leaving (its owner, a worker, stopped meanwhile): stop it
    if (!native().agentOwned()) return Promise.resolve();
    threadStats.role = 'owner';
  }
  state.stopping = (async () => {
    try {
      state.profilers.clear();
      await native().stop();
    } finally {
      state.agent = false;
      state.stopping = undefined;
    }
  })();
  return state.stopping;
}

/**
 * Exports the current period now and waits until it was uploaded or written (at most
 * timeoutSeconds, default 5). Resolves to false when an upload failed or was dropped,
 * or when nothing runs.
 */
async function flush(timeoutSeconds = 5) {
  if (typeof timeoutSeconds !== 'number' || !Number.isFinite(timeoutSeconds) || timeoutSeconds < 0) {
    throw new TypeError('flush(timeoutSeconds): a finite number >= 0');
  }
  if (!state.agent) return false;
  return native().flush(timeoutSeconds);
}

// Labels are never an error at request time (unless strictLabels): values that are not
// strings are made strings (numbers, booleans) or dropped (null, undefined, objects);
// names and values the server cannot take are fixed by the core; each fix is counted
// in stats().labels (coerced, dropped) and logged, one warning a minute (lib/context.js).

/**
 * Runs fn(...args) with the current labels plus `labels`; returns what fn returns. For an
 * async fn the labels hold across every await of it (and of what it starts), and two
 * concurrent calls never see each other's labels.
 */
function wrapWithLabels(labels, fn, ...args) {
  if (typeof fn !== 'function') throw new TypeError('wrapWithLabels: fn must be a function');
  const l = labelsApi();
  return l ? l.run(labels, fn, ...args) : fn(...args);
}

function getLabels() {
  const l = labelsApi();
  return l ? l.get() : {};
}

// Replaces the labels of the current async context (and what it starts from now on).
function setLabels(labels) {
  const l = labelsApi();
  if (l) l.set(labels);
}

// Deprecated in the anchor: the same as getLabels/setLabels.
function getWallLabels() {
  return getLabels();
}

function setWallLabels(labels) {
  setLabels(labels);
}

function setLogger(l) {
  logger.setLogger(l);
}

function stats() {
  checkAdopted();
  const s = nativeModule ? nativeModule.stats() : {};
  s.thread = Object.assign({}, threadStats);
  return s;
}

/**
 * Reads saved profiles (.pb/.pb.gz files, or folders of them) and writes a self-contained
 * flame graph page (options.output; default flamegraph.html in the first folder, null:
 * none). Resolves to {profiles, output, text}: text is the top table (options.top
 * functions, default 20) or, with groupBy, the total per value of that label first.
 * filter: {key: value | [values]} or ["key=value", ...]; diff: [selectionA, selectionB].
 */
async function writeReport(paths, options) {
  return native().writeReport(paths, options);
}

function isRunning() {
  return state.agent && nativeModule !== undefined && nativeModule.running();
}

const api = {
  SourceMapper,
  expressMiddleware,
  fastifyMiddleware,
  init,
  getWallLabels,
  setWallLabels,
  getLabels,
  setLabels,
  wrapWithLabels,
  start,
  startHeapProfiling,
  startWallProfiling,
  startCpuProfiling,
  stop,
  stopHeapProfiling,
  stopWallProfiling,
  stopCpuProfiling,
  setLogger,
  flush,
  stats,
  isRunning,
  writeReport,
  PyroscopeSpanProcessor,
};


module.exports = api;
// The anchor is compiled TypeScript: `require(...).default` is the same object.
Object.defineProperty(module.exports, 'default', { enumerable: false, value: api });
Object.defineProperty(module.exports, '__esModule', { enumerable: false, value: true });
