'use strict';
// Worker threads: the native half loads there (each worker its own thread entry).
const assert = require('assert');
const path = require('path');
const { Worker } = require('worker_threads');

describe('native: worker threads', function () {
  it('loads in a worker, which gets its own thread entry (given back when it ends)', async function () {
    const lib = path.join(__dirname, '..', 'lib', 'native.js');
    const native = require('../lib/native');
    const mine = require('../lib/addon').threadIndex();
    const before = native.stats().threads;
    const w = new Worker(`
      const { parentPort } = require('worker_threads');
      try {
        require(${JSON.stringify(lib)});
        parentPort.postMessage({ ok: true, index: require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'addon.js'))}).threadIndex() });
      } catch (e) { parentPort.postMessage({ ok: false, message: e.message, code: e.code }); }
    `, { eval: true });
    const exited = new Promise((r) => w.once('exit', r));
    const msg = await new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
    await exited;
    assert.strictEqual(msg.ok, true, msg.message);
    assert.ok(msg.index >= 0 && msg.index !== mine, JSON.stringify({ msg, mine }));
    const after = native.stats().threads;
    assert.strictEqual(after.registered, before.registered + 1);
    assert.strictEqual(after.released, before.released + 1);
  });
});

describe('native: a worker profiling itself beside the main thread', function () {
  this.timeout(60000);
  it('chains the worker\'s SIGPROF to V8 and keeps the main thread\'s samples', async function () {
    const native = require('../lib/native');
    const { tmpdir, rmdir, spin } = require('./native_helpers');
    const dir = tmpdir('worker-prof');
    try {
      native.start({ application_name: 'wp', output_dir: dir, sample_rate: 200 }, {});
      native.startProfiler('cpu', {});
      const w = new Worker(`
        const inspector = require('inspector');
        const { parentPort } = require('worker_threads');
        const s = new inspector.Session();
        s.connect();
        s.post('Profiler.enable');
        s.post('Profiler.setSamplingInterval', { interval: 1000 });
        s.post('Profiler.start');
        const end = Date.now() + 400; let x = 0; while (Date.now() < end) x += Math.sqrt(x + 1);
        s.post('Profiler.stop', (err, r) => parentPort.postMessage({ err: err && err.message, samples: r && r.profile.samples.length }));
      `, { eval: true });
      // listen for 'exit' now: it can come in the same turn as the message
      const exited = new Promise((r) => w.once('exit', r));
      const msgP = new Promise((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
        exited.then(() => setImmediate(() => resolve({ exitedWithoutMessage: true })));
      });
      spin(400);
      const msg = await msgP;
      await exited;
      assert.strictEqual(msg.err, null);
      assert.ok(msg.samples > 10, JSON.stringify(msg));
      const st = await native.stop();
      assert.ok(st.join.joined >= 10, JSON.stringify(st.join));
      // The worker's signals passed through our handler, which chained them
      // to V8 (the worker's profile has its samples).
      assert.ok(st.join.signalsOtherThreads > 0, JSON.stringify(st.join));
    } finally {
      if (native.running()) await native.stop();
      rmdir(dir);
    }
  });
});
