'use strict';
// What a default require + init() + start() loads (issue 13's memory goal): the pull
// endpoints' module (and with it node:zlib) only when a middleware is asked for. Each
// case runs in a fresh process, where nothing else has loaded them.
const assert = require('assert');
const { execFileSync } = require('child_process');
const path = require('path');
const { tmpdir } = require('./api-helpers');

const LIB = path.join(__dirname, '..', 'lib');

// Runs `body` after require + init + start in a fresh node (folder output unless
// `settings` say otherwise); returns the JSON it prints.
function inFreshProcess(body, settings, pre = '') {
  const dir = tmpdir('pn-memory-');
  const opts = settings || { outputDir: dir };
  const script = `
    ${pre}
    const Pyroscope = require(${JSON.stringify(LIB)});
    Pyroscope.init({ appName: 'memory.test', ...${JSON.stringify(opts)} });
    Pyroscope.start();
    const loaded = (f) => require.cache[require.resolve(${JSON.stringify(LIB)} + '/' + f)] !== undefined;
    const zlib = () => process.moduleLoadList.includes('NativeModule zlib');
    const curl = () => /libcurl/.test(require('fs').readFileSync('/proc/self/maps', 'utf8'));
    ${body}
    Pyroscope.stop().then(() => console.log(JSON.stringify(out)));`;
  return JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60000,
    stdio: ['ignore', 'pipe', 'pipe'] }));
}

describe('api memory: what a default start() loads', function () {
  this.timeout(90000);

  it('does not load the middleware or node:zlib until a middleware is made', () => {
    const out = inFreshProcess(`
      const out = { before: loaded('middleware.js'), zlibBefore: zlib() };
      const mw = Pyroscope.expressMiddleware();
      out.after = loaded('middleware.js');
      out.zlibAfter = zlib();
      out.isFunction = typeof mw === 'function';`);
    assert.deepStrictEqual(out, { before: false, zlibBefore: false, after: true, zlibAfter: true,
      isFunction: true });
  });

  it('makes the fastify plugin from the same lazily loaded module', () => {
    const out = inFreshProcess(`
      const out = { before: loaded('middleware.js') };
      out.isFunction = typeof Pyroscope.fastifyMiddleware() === 'function';
      out.after = loaded('middleware.js');`);
    assert.deepStrictEqual(out, { before: false, isFunction: true, after: true });
  });

  // libcurl and the ~30 libraries it pulls in cost about 5.6 MiB of RSS (bench/node/memory.js):
  // a folder output never loads them.
  it('does not load libcurl when writing to a folder only', () => {
    const out = inFreshProcess(`
      const out = { started: curl() };
      Pyroscope.stop().then(() => { out.stopped = curl(); });`);
    assert.deepStrictEqual(out, { started: false, stopped: false });
  });

  // Uploads go through node's own http (lib/sender.js): libcurl stays out.
  it('does not load libcurl when it uploads either', () => {
    // a closed loopback port: nothing is sent, the exporter is made all the same
    const out = inFreshProcess('const out = { started: curl() };',
      { serverAddress: 'http://127.0.0.1:9', stopTimeout: 1 });
    assert.deepStrictEqual(out, { started: false });
  });

  it('loads libcurl when told to upload through it (the checks above can see it)', () => {
    const out = inFreshProcess('const out = { started: curl() };',
      { serverAddress: 'http://127.0.0.1:9', stopTimeout: 1 },
      `require(${JSON.stringify(LIB + '/native')}).setUploadClient('libcurl');`);
    assert.deepStrictEqual(out, { started: true });
  });
});
