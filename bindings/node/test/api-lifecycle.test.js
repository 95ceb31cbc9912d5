'use strict';
// Life cycle through the public API: init() while running, stop() then start() again,
// setLogger() receiving the core's warnings, worker threads (labels run, init
// refused with a clear error, never a crash).
const assert = require('assert');
const { Worker } = require('worker_threads');
const { loadNative, tmpdir, decodeFolder, samplesOf, count, burn, inFunction } = require('./api-helpers');

const native = loadNative();
const api = require('../lib');

describe('api life cycle', function () {
  this.timeout(60000);
  before(function () {
    if (!native) this.skip(); // no lib/native.js in this tree (see loadNative)
  });
  afterEach(async () => {
    await api.stop();
    api.setLogger(null);
  });

  it('init() while running throws; after stop() the profiler starts again', async () => {
    const first = tmpdir('pn-cycle1-');
    const second = tmpdir('pn-cycle2-');
    api.init({ appName: 'cycle.one', outputDir: first, uploadInterval: 1 });
    api.start();
    assert.strictEqual(api.isRunning(), true);
    assert.throws(() => api.init({ appName: 'cycle.two', outputDir: second }), /call stop\(\)/);
    function burnFirstRun() { return burn(100); }
    burnFirstRun();
    await api.stop();
    assert.strictEqual(api.isRunning(), false);
    api.init({ appName: 'cycle.two', outputDir: second, uploadInterval: 1 });
    api.start();
    function burnSecondRun() { return burn(100); }
    burnSecondRun();
    await api.stop();
    const has = (dir, fn) => count(samplesOf(decodeFolder(dir), 'cpu'), inFunction(fn));
    assert.ok(has(first, 'burnFirstRun') > 0, 'first run profiled');
    assert.ok(has(second, 'burnSecondRun') > 0, 'second run profiled');
    assert.strictEqual(has(second, 'burnFirstRun'), 0, 'second run has only its own samples');
  });

  it('setLogger() receives the core\'s warnings (an unreachable server)', async () => {
    const seen = [];
    const rec = (level) => (...args) => seen.push([level, args.join(' ')]);
    api.setLogger({ debug: rec('debug'), info: rec('info'), warn: rec('warn'), error: rec('error'), trace: rec('trace'), fatal: rec('fatal') });
    // port 9 on loopback: nothing listens (discard), the connection is refused
    api.init({ appName: 'logger.test', serverAddress: 'http://127.0.0.1:9', uploadInterval: 1, stopTimeout: 1 });
    api.start();
    burn(50);
    assert.strictEqual(await api.flush(2), false, 'a failed upload makes flush() false');
    await api.stop();
    // log lines reach JS through the event loop: wait for one, with a generous deadline
    const warned = () => seen.filter(([l]) => l === 'warn' || l === 'error');
    for (const end = Date.now() + 20000; warned().length === 0 && Date.now() < end;) {
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(warned().length > 0, `no warning logged: ${JSON.stringify(seen)}`);
  });

  it('a logger that throws does not break the profiler', async () => {
    const boom = () => { throw new Error('logger broken'); };
    api.setLogger({ debug: boom, info: boom, warn: boom, error: boom, trace: boom, fatal: boom });
    api.init({ appName: 'logger.broken', serverAddress: 'http://127.0.0.1:9', uploadInterval: 1, stopTimeout: 1 });
    api.start();
    burn(20);
    await api.flush(1);
    await api.stop();
  });

  it('setLogger refuses objects without the logging methods', () => {
    assert.throws(() => api.setLogger({ info() {} }), /no debug\(\) method/);
  });

  it('in a worker thread: labels and the span processor work, init() does not throw', async () => {
    const lib = require.resolve('../lib');
    const result = await new Promise((resolve, reject) => {
      const w = new Worker(`
        const { parentPort } = require('worker_threads');
        const api = require(${JSON.stringify(lib)});
        (async () => {
          const out = {};
          out.wrapped = await api.wrapWithLabels({ k: 'v' }, async (x) => { await null; return x * 2; }, 21);
          out.labels = api.getLabels();
          const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
          const p = new api.PyroscopeSpanProcessor();
          new BasicTracerProvider({ spanProcessors: [p] }).getTracer('w').startSpan('s').end();
          out.spanErrors = p.errors;
          try { api.init({ appName: 'w', outputDir: '/nonexistent' }); out.init = 'no error'; }
          catch (e) { out.init = e.code; out.message = e.message; }
          parentPort.postMessage(out);
        })();`, { eval: true });
      w.once('message', resolve);
      w.once('error', reject);
    });
    assert.strictEqual(result.wrapped, 42);
    assert.deepStrictEqual(result.labels, {});
    assert.strictEqual(result.spanErrors, 0);
    // before: ERR_PYROSCOPE_WORKER (workers are profiled now: api-worker.test.js)
    assert.strictEqual(result.init, 'no error', result.message);
  });
});
