'use strict';
// Worker threads: requiring the native half there is a clear Error, never a crash.
const assert = require('assert');
const path = require('path');
const { Worker } = require('worker_threads');

describe('native: worker threads', function () {
  it('refuses to load in a worker with a clear error', async function () {
    const lib = path.join(__dirname, '..', 'lib', 'native.js');
    const w = new Worker(`
      const { parentPort } = require('worker_threads');
      try { require(${JSON.stringify(lib)}); parentPort.postMessage({ ok: true }); }
      catch (e) { parentPort.postMessage({ ok: false, message: e.message, code: e.code }); }
    `, { eval: true });
    const msg = await new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
    await new Promise((r) => w.once('exit', r));
    assert.strictEqual(msg.ok, false);
    assert.strictEqual(msg.code, 'ERR_PYROSCOPE_WORKER');
    assert.match(msg.message, /main thread/);
  });
});
