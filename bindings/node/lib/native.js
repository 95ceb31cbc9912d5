'use strict';
// The native half of the Node binding, as the public package (index.js)
// uses it:
//   settingTable(), checkSettings(settings, env), start(settings, env)
//     settings: {<core setting name>: string | number | boolean}, pairs
//     (tags, http_headers, otlp_headers) as {k: v}; env: PYROSCOPE_* /
//     OTEL_* variables applied first. Errors name the setting
//     (err.code ERR_PYROSCOPE_CONFIG; a TypeError for a value of the wrong type).
//   startProfiler('cpu' | 'wall' | 'heap', opts), stopProfiler(kind) -> Promise
//     cpu/wall opts: samplingIntervalMicros, collectCpuTime (wall), mapFrame;
//     heap opts: samplingIntervalBytes, stackDepth, mapFrame.
//     mapFrame({name, file, line, column}) -> {name, file, line} | null.
//   flush(timeoutSeconds) -> Promise<boolean>, stop() -> Promise<stats | null>,
//   running(), stats(), setLogHandler(fn(level, message) | null)
//   setUploadClient('node' | 'libcurl', {pickupTimeoutMs}?): how the next
//     start() uploads (Node's http through sender.js, the default; or
//     libcurl, for tests and benchmarks); pickupTimeoutMs: how long an upload
//     waits for a busy JS thread before libcurl sends it (default: the
//     upload's timeout, 10 s; tests shorten it)
//   exitStats(): the final stats of the stop the exit handler made (tests)
//   writeReport(paths, opts) -> Promise<{profiles, output, text}> (see report.js);
//   with outputDir, stop() and exit write flamegraph.html of the run's profiles.
//   labels.run(labels, fn, ...args), labels.get(), labels.set(labels),
//   labels.spanHandle([[k, v], ...]), labels.setSpanSource(fn | null)
//   start() -> 'owner' | 'joined' (an agent runs already: nothing started).
//   agentOwned(): this thread owns the running agent (its stop() stops it);
//   a thread that did not start it (a worker, or the main thread after a
//   worker started it) profiles into that agent with startProfiler and ends
//   its own profiling with leave(); setStaleHandler(fn) calls fn('gone') when
//   that agent stopped or was replaced under it, fn('owner') when its owner
//   (a worker) stopped or ended and handed it to this thread (then adopt()).
//   A worker that owns the agent and stops while others profile into it
//   hands it over instead of stopping it.
// It loads in worker threads too (each its own isolate, one process agent).
const addon = require('./addon');
const context = require('./context');
const sampler = require('./sampler');
const report = require('./report');
const sender = require('./sender');

const KINDS = ['cpu', 'wall', 'heap'];
let exitHooked = false;
let stopping = null; // the promise of a stop in progress

// The core's settings table (one object per setting: name, kind, default, env, node...).
function settingTable() {
  return addon.settingTable();
}

// {core name: string form} of what start(settings, env) would run with (tests).
function resolveSettings(settings, env) {
  return addon.resolveSettings(settings || {}, env || {});
}

function checkSettings(settings, env) {
  addon.checkSettings(settings || {}, env || {});
}

// On exit the last period is exported within stop_timeout: at beforeExit
// (the loop is empty; the asynchronous stop keeps it alive until done), or
// at exit (process.exit(): nothing asynchronous runs, stop synchronously).
function hookExit() {
  if (exitHooked) return;
  exitHooked = true;
  // (only while this thread owns the agent: a thread that joined another's ends its own
  // profiling, index.js)
  process.on('beforeExit', () => {
    if (addon.running() && addon.agentOwned() && !stopping) stop().catch(() => {});
  });
  process.on('exit', stopAtExit);
}

// process 'exit' of the thread that owns the agent (index.js calls it too for a thread
// handed the agent that had not noticed yet).
function stopAtExit() {
  if (!addon.running() || !addon.agentOwned()) {
    // a stop() still uploading the last period: let it finish (Node 20's
    // exit also joins libuv's pool; this does not rely on it)
    if (stopping) {
      sender.exiting();
      addon.waitStops(stopTimeout + 1);
      report.endRunSync(addon); // the stop's flame graph, unless it began writing it
    }
    return;
  }
  try {
    sampler.stopAll();
  } catch (_) { /* stopping anyway */ }
  if (addon.handOver()) return; // a worker's agent goes on for the threads still in it
  sender.exiting(); // before the JS thread blocks in stopSync
  lastExitStats = addon.stopSync();
  report.endRunSync(addon);
}

let stopTimeout = 5; // seconds, of the agent started last
let lastExitStats = null;

// Uploads go through Node's http/https (sender.js) unless set to 'libcurl'
// (tests, benchmarks): libcurl is then loaded at start, as in Python.
let uploadClient = 'node';
let pickupTimeoutMs = 0;
function setUploadClient(name, opts) {
  if (name !== 'node' && name !== 'libcurl') throw new TypeError("upload client: 'node' or 'libcurl'");
  uploadClient = name;
  pickupTimeoutMs = (opts && opts.pickupTimeoutMs) || 0;
}

// -> 'owner': this thread started the agent; 'joined': one runs already (checked and
// started in one step, so threads starting at once never both start): nothing started.
function start(settings, env) {
  addon.setSender(uploadClient === 'node' ? sender.send : null, pickupTimeoutMs);
  if (addon.start(settings || {}, env || {}) === 'joined') return 'joined';
  report.beginRun(addon);
  adopt();
  return 'owner';
}

// This thread owns the running agent (started it, or another thread handed it over):
// its stop() and its exit stop it.
function adopt() {
  const c = addon.config();
  if (c) stopTimeout = c.stopTimeout;
  hookExit();
}

function startProfiler(kind, opts) {
  if (!KINDS.includes(kind)) {
    const e = new TypeError('startProfiler: kind must be one of ' + KINDS.join(', ') + ', not ' + String(kind));
    e.code = 'ERR_INVALID_ARG_VALUE';
    throw e;
  }
  if (!addon.running()) {
    const e = new Error('startProfiler(' + kind + '): start() the agent first');
    e.code = 'ERR_PYROSCOPE_STATE';
    throw e;
  }
  sampler.start(kind, opts || {});
  if (kind !== 'heap') context.enable();
}

function publishWhileSampling() {
  if (!sampler.running('cpu') && !sampler.running('wall')) context.disable();
}

async function stopProfiler(kind) {
  if (!KINDS.includes(kind)) throw new TypeError('stopProfiler: kind must be one of ' + KINDS.join(', '));
  sampler.stop(kind);
  publishWhileSampling();
}

// The flush cuts the period when it starts; the samples of its last moments
// reach the drivers with the profile restart just after, so the flush need
// not wait for the next periodic restart.
function flush(timeoutSeconds) {
  if (addon.running()) sampler.sync();
  const p = addon.flush(timeoutSeconds === undefined ? 5 : timeoutSeconds);
  if (addon.running()) sampler.syncSoon();
  return p;
}

function stop() {
  if (stopping) return stopping;
  if (!addon.running()) return Promise.resolve(null);
  try {
    sampler.stopAll();
  } catch (e) {
    addon.log(40, 'stopping the profilers failed: ' + (e && e.stack || e));
  }
  context.disable();
  // a worker's agent goes on for the threads still profiling into it (one owns it now)
  if (addon.handOver()) return Promise.resolve(null);
  // With a folder output, the run's flame graph is written once the last period is.
  const p = addon.stop().then(async (stats) => {
    sender.abandon();
    await report.endRun(addon);
    return stats;
  });
  stopping = p.finally(() => { stopping = null; });
  return stopping;
}

function running() {
  return addon.running();
}

// A thread that joined another's agent ends its own profiling (the agent
// runs on). Its last samples are recorded first.
function leave() {
  try {
    sampler.stopAll();
  } catch (e) {
    addon.log(40, 'stopping the profilers failed: ' + (e && e.stack || e));
  }
  context.disable();
}

function stats() {
  const s = addon.stats();
  s.labels = addon.labelsCounts();
  s.profilers = { cpu: sampler.running('cpu'), wall: sampler.running('wall'), heap: sampler.running('heap') };
  s.sender = addon.senderStats(); // {sent, declined}: by node's http, or libcurl instead
  return s;
}

function setLogHandler(fn) {
  addon.setLogHandler(fn === undefined ? null : fn);
}

module.exports = {
  settingTable,
  resolveSettings,
  statsTable: () => addon.statsTable(),
  checkSettings,
  start,
  setUploadClient,
  exitStats: () => lastExitStats,
  startProfiler,
  stopProfiler,
  stop,
  flush,
  running,
  leave,
  agentOwned: () => addon.agentOwned(),
  adopt,
  stopAtExit,
  heapNotOwnedWarn: () => addon.heapNotOwnedWarn(),
  setStaleHandler: (fn) => sampler.setStaleHandler(fn),
  threadLabel: () => sampler.threadLabel(),
  stats,
  setLogHandler,
  writeReport: (paths, opts) => report.writeReport(addon, paths, opts),
  labels: {
    run: context.run,
    get: context.get,
    set: context.set,
    spanHandle: context.spanHandle,
    setSpanSource: context.setSpanSource,
  },
};
