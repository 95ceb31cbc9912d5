'use strict';
// Heap snapshots within their budget: each costs a full GC (the inspector's
// kSamplingForceGC), so periods between fresh snapshots record the last one
// again (sampler.js).
const assert = require('assert');
const native = require('../lib/native');
const sampler = require('../lib/sampler');
const { tmpdir, rmdir, profiles, samples, total, has } = require('./native_helpers');

function heapKept(n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push({ i, s: 'kept-' + i });
  return out;
}

describe('native: heap snapshot budget', function () {
  this.timeout(60000);
  afterEach(async function () {
    sampler.heapBudget();
    if (native.running()) await native.stop();
  });

  it('a fresh snapshot is due when the last one\'s cost fits the budget, or it is stale', function () {
    assert.strictEqual(sampler.heapFreshDue(null, 0), true);
    // 10 ms of process CPU at 0.01 % of a core: 100 s apart (at 0.05 % of
    // the JS thread's time, before, 20 s: with V8's recompiles after each
    // forced GC, that cost more than the rest of the profiler, bench/node)
    const last = { at: 1000, ms: 10 };
    assert.strictEqual(sampler.heapFreshDue(last, 1000), false);
    assert.strictEqual(sampler.heapFreshDue(last, 21000), false);
    assert.strictEqual(sampler.heapFreshDue(last, 100999), false);
    assert.strictEqual(sampler.heapFreshDue(last, 101000), true);
    const slow = { at: 0, ms: 2000 }; // would be 1000 s apart: capped at 300 s
    assert.strictEqual(sampler.heapFreshDue(slow, 299999), false);
    assert.strictEqual(sampler.heapFreshDue(slow, 300000), true);
  });

  it('periods between fresh snapshots still get the last one\'s in-use memory', async function () {
    const dir = tmpdir('heapbudget');
    try {
      sampler.heapBudget(1e-12, 3600e3); // never fresh again after the first
      native.start({ application_name: 'heapbudget', output_dir: dir, upload_interval: 3600 }, {});
      native.startProfiler('heap', { samplingIntervalBytes: 16384 });
      globalThis.__pnHeapKept = heapKept(200000);
      const c0 = sampler.costs();
      for (let i = 0; i < 3; i++) assert.strictEqual(await native.flush(20), true);
      await native.stopProfiler('heap');
      const c1 = sampler.costs();
      await native.stop();
      assert.strictEqual(c1.heap_snapshots - c0.heap_snapshots, 1);
      // the fresh one's cost is the process's CPU (a full GC of > 4 MB live)
      assert.ok(c1.heap_cpu_ms - c0.heap_cpu_ms > 0, JSON.stringify(c1));
      assert.ok(c1.heap_replays - c0.heap_replays >= 2, JSON.stringify(c1));
      const per = profiles(dir, 'heap').map((p) => total(samples([p]), 1, (s) => has(s, 'heapKept')));
      assert.ok(per.length >= 3, `heap profiles: ${per.length}`);
      // every period shows the retained 200 000 objects (> 4 MB), the replayed ones too
      for (const bytes of per) assert.ok(bytes >= 4e6, `heapKept in-use bytes per period: ${per}`);
    } finally {
      delete globalThis.__pnHeapKept;
      rmdir(dir);
    }
  });
});
