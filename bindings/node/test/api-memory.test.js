'use strict';
// What a default require + init() + start() loads (issue 13's memory goal): the pull
// endpoints' module (and with it node:zlib) only when a middleware is asked for. Each
// case runs in a fresh process, where nothing else has loaded them.
const assert = require('assert');
const { execFileSync } = require('child_process');
const path = require('path');
const { tmpdir } = require('./api-helpers');

const LIB = path.join(__dirname, '..', 'lib');

// Runs `body` after require + init (folder output) + start in a fresh node; returns the
// JSON it prints.
function inFreshProcess(body) {
  const dir = tmpdir('pn-memory-');
  const script = `
    const Pyroscope = require(${JSON.stringify(LIB)});
    Pyroscope.init({ appName: 'memory.test', outputDir: ${JSON.stringify(dir)} });
    Pyroscope.start();
    const loaded = (f) => require.cache[require.resolve(${JSON.stringify(LIB)} + '/' + f)] !== undefined;
    const zlib = () => process.moduleLoadList.includes('NativeModule zlib');
    ${body}
    Pyroscope.stop().then(() => console.log(JSON.stringify(out)));`;
  return JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60000 }));
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
});
