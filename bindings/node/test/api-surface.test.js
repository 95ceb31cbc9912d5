'use strict';
// The export list of @pyroscope/nodejs 0.6.4 (dist/cjs/index.js: its named exports and the
// keys of its default export, copied here as literals) against ours, CommonJS and ESM.
const assert = require('assert');
const { execFileSync } = require('child_process');
const path = require('path');
const { pathToFileURL } = require('url');

const ANCHOR_DEFAULT_KEYS = [
  'SourceMapper', 'expressMiddleware', 'fastifyMiddleware', 'init', 'getWallLabels',
  'setWallLabels', 'getLabels', 'setLabels', 'wrapWithLabels', 'start', 'startHeapProfiling',
  'startWallProfiling', 'startCpuProfiling', 'stop', 'stopHeapProfiling', 'stopWallProfiling',
  'stopCpuProfiling', 'setLogger',
];
const ANCHOR_NAMED = ['init', 'wrapWithLabels', 'start', 'stop', 'default'];
const OURS = ['PyroscopeSpanProcessor', 'flush'];
const LIB = path.join(__dirname, '..', 'lib');

describe('api surface', () => {
  const api = require(LIB);

  it('has every export of @pyroscope/nodejs 0.6.4 at the top level and on default', () => {
    for (const k of [...ANCHOR_DEFAULT_KEYS, ...OURS]) {
      assert.ok(k in api, `missing export ${k}`);
      assert.ok(k in api.default, `missing default.${k}`);
      assert.strictEqual(api[k], api.default[k]);
    }
    for (const k of ANCHOR_NAMED) assert.ok(k in api, `missing named export ${k}`);
  });

  it('exports functions where the anchor does, SourceMapper as a class with create()', () => {
    for (const k of ANCHOR_DEFAULT_KEYS) {
      assert.strictEqual(typeof api[k], 'function', k);
    }
    assert.strictEqual(typeof api.SourceMapper.create, 'function');
    assert.strictEqual(typeof api.PyroscopeSpanProcessor, 'function');
  });

  it('stop() returns a promise and resolves when nothing runs', async () => {
    const p = api.stop();
    assert.ok(p instanceof Promise);
    await p;
    for (const k of ['stopCpuProfiling', 'stopWallProfiling', 'stopHeapProfiling']) {
      const q = api[k]();
      assert.ok(q instanceof Promise, k);
      await q;
    }
  });

  it('start() before init() throws the anchor\'s message', () => {
    // in a fresh process: other test files call init() in this one
    const out = execFileSync(process.execPath, ['-e', `
      const api = require(${JSON.stringify(LIB)});
      for (const f of ['start', 'startCpuProfiling', 'startWallProfiling', 'startHeapProfiling']) {
        try { api[f](); console.log(f, 'did not throw'); } catch (e) { console.log(f, e.message); }
      }`], { encoding: 'utf8' });
    const lines = out.trim().split('\n');
    assert.strictEqual(lines.length, 4, out);
    for (const l of lines) assert.match(l, /Pyroscope is not configured\. Please call init\(\) first/);
  });

  it('the package name resolves (package.json exports) to these entries', async () => {
    assert.strictEqual(require('pyroscope-native'), api);
    const esm = await import('pyroscope-native');
    assert.strictEqual(esm.default, api);
    assert.strictEqual(esm.wrapWithLabels, api.wrapWithLabels);
  });

  it('the ESM entry has the same default and named exports', async () => {
    const esm = await import(pathToFileURL(path.join(LIB, 'index.mjs')).href);
    assert.strictEqual(esm.default, api);
    for (const k of [...ANCHOR_DEFAULT_KEYS, ...OURS]) {
      assert.strictEqual(esm[k], api[k], `ESM export ${k}`);
    }
  });

  it('the TypeScript types compile (only where typescript is installed)', function () {
    let ts;
    try {
      ts = require('typescript');
    } catch (_) {
      this.skip();
    }
    const file = path.join(__dirname, 'fixtures', 'types-check.ts');
    const program = ts.createProgram([file], { strict: true, noEmit: true, esModuleInterop: true, target: ts.ScriptTarget.ES2022, lib: ['lib.es2022.d.ts'], types: [] });
    const diags = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    assert.deepStrictEqual(diags, []);
  });
});
