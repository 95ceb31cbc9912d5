'use strict';
// The heap profile as the shared `memory` profile (issue 26, Node): the `memory` and
// `memoryInterval` settings drive it, and on a known workload its in-use bytes match the
// truth (V8's own used-heap delta) within 10 %, see only what is kept, and lose it once it is
// freed and collected. Each case runs in a fresh `node --expose-gc` (gc(), and a heap
// with nothing else of the test runner's in it).
const assert = require('assert');
const { execFileSync } = require('child_process');
const path = require('path');
const { tmpdir, rmdir, profiles, samples, total } = require('./native_helpers');

// Frames are named as the anchor named them, file:function:line.
const has = (s, fn) => s.stack.some((f) => f.split(':').includes(fn));

const LIB = path.join(__dirname, '..', 'lib');

// Runs `body` (async, may await) after init(options) + start() in a fresh node; returns
// what it assigns to `out`.
function inFreshProcess(options, body) {
  const script = `
    const Pyroscope = require(${JSON.stringify(LIB)});
    // every heap snapshot fresh (the default takes one per >= 65 s: a full GC each)
    require(${JSON.stringify(LIB + '/sampler')}).heapBudget(1e9, 3600e3);
    const v8 = require('v8');
    const used = () => { gc(); gc(); return v8.getHeapStatistics().used_heap_size; };
    const out = {};
    (async () => {
      Pyroscope.init(${JSON.stringify(options)});
      Pyroscope.start();
      ${body}
      await Pyroscope.stop();
      console.log(JSON.stringify(out));
    })().catch((e) => { console.error(e); process.exit(1); });`;
  return JSON.parse(execFileSync(process.execPath, ['--expose-gc', '-e', script],
    { encoding: 'utf8', timeout: 120000, stdio: ['ignore', 'pipe', 'inherit'] }));
}

// The workload, named so its frames can be found: keptAlloc's arrays stay alive,
// freedAlloc's die young (a ring of 1024 keeps them from being optimised away).
const WORKLOAD = `
  function keptAlloc(n) {
    const out = [];
    for (let i = 0; i < n; i++) out.push(new Array(16).fill(i));
    return out;
  }
  function freedAlloc(n) {
    const ring = new Array(1024);
    for (let i = 0; i < n; i++) ring[i & 1023] = new Array(16).fill(i);
    return ring.length;
  }`;

describe('api heap profile: the memory setting and in-use accuracy', function () {
  this.timeout(180000);

  it('in-use bytes of the kept objects within 10 % of the truth; freed ones absent; gone once freed', () => {
    const dir = tmpdir('heapmem');
    try {
      const interval = 8192; // ~4500 samples of the kept 35 MiB: a standard error of ~1.5 %
      const out = inFreshProcess({ appName: 'heapmem', outputDir: dir, uploadInterval: 3600,
        memory: true, memoryInterval: interval }, `
        ${WORKLOAD}
        freedAlloc(400000);               // ~70 MiB allocated and dropped
        const before = used();
        globalThis.kept = keptAlloc(200000); // ~35 MiB kept
        out.truth = used() - before;
        out.first = await Pyroscope.flush(30);
        globalThis.kept = null;
        gc(); gc();
        out.second = await Pyroscope.flush(30);`);
      assert.strictEqual(out.first, true);
      assert.strictEqual(out.second, true);
      assert.ok(out.truth > 30 * 1048576, `kept ${out.truth} B`);
      const per = profiles(dir, 'heap').sort((a, b) => Number(a.timeNanos) - Number(b.timeNanos));
      assert.ok(per.length >= 2, `heap profiles: ${per.length}`);
      const kept = per.map((p) => total(samples([p]), 1, (s) => has(s, 'keptAlloc')));
      const freed = per.map((p) => total(samples([p]), 1, (s) => has(s, 'freedAlloc')));
      // the sampling interval is memoryInterval's: the profile's period says so
      assert.strictEqual(Number(per[0].period), interval);
      const err = Math.abs(kept[0] - out.truth) / out.truth;
      assert.ok(err <= 0.10, `in-use of keptAlloc ${kept[0]} B vs truth ${out.truth} B (${(err * 100).toFixed(1)} %)`);
      assert.ok(freed[0] < 0.01 * out.truth, `in-use of freedAlloc: ${freed[0]} B`);
      const last = kept[kept.length - 1];
      assert.ok(last < 0.01 * out.truth, `in-use of keptAlloc once freed: ${last} B (periods: ${kept})`);
    } finally {
      rmdir(dir);
    }
  });

  // Node 26: heap.allocations profiles what was allocated in each period (V8 keeps the
  // samples of collected objects), the dropped objects as much as the kept ones.
  it('heap.allocations (Node 26+): alloc_space of dropped and kept objects within 10 % of the truth', function () {
    if (typeof require('v8').startHeapProfile !== 'function') this.skip(); // Node < 26: the next case
    const dir = tmpdir('heapalloc');
    try {
      const n = 200000;
      const out = inFreshProcess({ appName: 'heapalloc', outputDir: dir, uploadInterval: 3600,
        memoryInterval: 8192, heap: { allocations: true } }, `
        function keptAlloc(out) { for (let i = 0; i < out.length; i++) out[i] = new Array(16).fill(i); }
        function freedAlloc(n) {
          const ring = new Array(1024);
          for (let i = 0; i < n; i++) ring[i & 1023] = new Array(16).fill(i);
          return ring.length;
        }
        const holder = new Array(${n}).fill(null);
        const before = used();
        keptAlloc(holder);
        globalThis.kept = holder;
        out.kept = used() - before;         // ${n} arrays: their bytes, each allocated once
        out.first = await Pyroscope.flush(30);
        freedAlloc(${2 * n});              // twice as many, all dropped
        gc();
        out.second = await Pyroscope.flush(30);
        // no in-use profile to pull meanwhile: the running one keeps collected objects
        const mw = Pyroscope.expressMiddleware();
        out.pull = await new Promise((resolve) => mw({ method: 'GET', path: '/debug/pprof/heap', query: {} },
          { status(c) { resolve(c); return { send() {} }; }, sendStatus: resolve }, () => resolve('next')));`);
      assert.strictEqual(out.pull, 500);
      assert.strictEqual(out.first, true);
      assert.strictEqual(out.second, true);
      const per = profiles(dir, 'heap').sort((a, b) => Number(a.timeNanos) - Number(b.timeNanos));
      const types = samples([per[0]])[0].types;
      assert.deepStrictEqual(types, ['alloc_objects', 'alloc_space']);
      const all = samples(per);
      const kept = total(all, 1, (s) => has(s, 'keptAlloc'));
      const freed = total(all, 1, (s) => has(s, 'freedAlloc'));
      const errKept = Math.abs(kept - out.kept) / out.kept;
      const errFreed = Math.abs(freed - 2 * out.kept) / (2 * out.kept);
      assert.ok(errKept <= 0.10, `alloc_space of keptAlloc ${kept} B vs ${out.kept} B (${(errKept * 100).toFixed(1)} %)`);
      assert.ok(errFreed <= 0.10, `alloc_space of freedAlloc ${freed} B vs ${2 * out.kept} B (${(errFreed * 100).toFixed(1)} %)`);
      // each allocation in the period it was made: the kept ones in the first, once
      const first = total(samples([per[0]]), 1, (s) => has(s, 'keptAlloc'));
      assert.ok(Math.abs(first - kept) <= 0.02 * kept, `keptAlloc per period: first ${first} of ${kept}`);
      assert.ok(total(samples([per[0]]), 1, (s) => has(s, 'freedAlloc')) < 0.02 * freed);
      assert.ok(total(all, 0, (s) => has(s, 'freedAlloc')) >= 2 * n * 0.9, 'alloc_objects: V8\'s scaled counts');
    } finally {
      rmdir(dir);
    }
  });

  it('heap.allocations before Node 26: a warning, and the in-use profile', function () {
    if (typeof require('v8').startHeapProfile === 'function') this.skip();
    const { resolveConfig } = require('../lib/config');
    const native = require('../lib/native');
    const r = resolveConfig({ appName: 'a', heap: { allocations: true } }, {}, native);
    assert.strictEqual(r.heap.allocations, false);
    assert.ok(r.warnings.some((w) => /heap.allocations: allocation profiles need Node 26/.test(w)), r.warnings.join('; '));
  });

  it('memory: false starts no heap profile; PYROSCOPE_MEMORY_INTERVAL sets the interval', () => {
    const off = tmpdir('heapmem-off');
    const on = tmpdir('heapmem-on');
    try {
      inFreshProcess({ appName: 'heapmem', outputDir: off, uploadInterval: 3600, memory: false },
        'globalThis.k = new Array(100000).fill(0).map((_, i) => ({ i })); out.f = await Pyroscope.flush(30);');
      assert.strictEqual(profiles(off, 'heap').length, 0);
      assert.ok(profiles(off, 'cpu').length >= 1); // start() ran the time profile
      process.env.PYROSCOPE_MEMORY_INTERVAL = '32768';
      try {
        inFreshProcess({ appName: 'heapmem', outputDir: on, uploadInterval: 3600 },
          'globalThis.k = new Array(100000).fill(0).map((_, i) => ({ i })); out.f = await Pyroscope.flush(30);');
      } finally {
        delete process.env.PYROSCOPE_MEMORY_INTERVAL;
      }
      const heap = profiles(on, 'heap');
      assert.ok(heap.length >= 1);
      assert.strictEqual(Number(heap[0].period), 32768);
    } finally {
      rmdir(off);
      rmdir(on);
    }
  });
});
