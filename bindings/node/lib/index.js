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
// All state here belongs to the main JS thread (the addon refuses worker threads).

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

// Labels in a worker thread, where the addon refuses to load (only the main thread is
// profiled): shared code that labels its work keeps running, unlabelled; init() and
// start() there still throw the addon's error.
let workerNoticeShown = false;
function labelsApi() {
  try {
    return native().labels;
  } catch (e) {
    if (e.code !== 'ERR_PYROSCOPE_WORKER') throw e;
    if (!workerNoticeShown) {
      workerNoticeShown = true;
      logger.debug('labels are not recorded in worker threads (only the main thread is profiled)');
    }
    return undefined;
  }
}

// The configuration from init() and what runs. Main thread only.
const state = {
  resolved: undefined,   // config.resolveConfig() result
  mapFrame: undefined,   // frame mapper of the resolved config
  agent: false,          // native.start() done and not stopped
  profilers: new Set(),  // kinds started: 'cpu' | 'wall' | 'heap'
  stopping: undefined,   // the promise of a running stop()
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
  const n = native();
  if (state.agent || n.running()) {
    throw config.configError('init(): the profiler is running; call stop() (and await it) ' +
      'before init() with new options');
  }
  const resolved = config.resolveConfig(options, process.env, n.settingTable());
  n.setLogHandler(onNativeLog); // the core's warnings about settings go to setLogger's logger
  for (const text of resolved.warnings) logger.warn(text);
  try {
    n.checkSettings(resolved.settings, resolved.env);
  } catch (e) {
    throw config.renameError(e, resolved.origins);
  }
  state.resolved = resolved;
  state.mapFrame = frameMapper(resolved.frames);
}

function requireInit(what) {
  if (!state.resolved) {
    throw new Error(`${what}: Pyroscope is not configured. Please call init() first.`);
  }
}

// Starts the agent (pipeline and exporters) on the first profiler start.
function ensureAgent(what) {
  requireInit(what);
  if (state.stopping) {
    throw new Error(`${what}: stop() is still running; await it before starting again`);
  }
  const n = native();
  if (state.agent && n.running()) return;
  // (not running although started: the addon stopped it at beforeExit; start afresh)
  state.profilers.clear();
  n.setLogHandler(onNativeLog);
  try {
    n.start(state.resolved.settings, state.resolved.env);
  } catch (e) {
    throw config.renameError(e, state.resolved.origins);
  }
  state.agent = true;
}

function startKind(kind, what) {
  ensureAgent(what);
  if (state.profilers.has(kind)) return;
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

function startCpuProfiling() {
  startKind(timeKind(), 'startCpuProfiling');
}

async function stopCpuProfiling() {
  await stopKind(timeKind());
}

function startWallProfiling() {
  startKind('wall', 'startWallProfiling');
}

async function stopWallProfiling() {
  await stopKind('wall');
}

function startHeapProfiling() {
  startKind('heap', 'startHeapProfiling');
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
  if (state.stopping) return state.stopping;
  if (!state.agent) return Promise.resolve();
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
  return nativeModule ? nativeModule.stats() : {};
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
