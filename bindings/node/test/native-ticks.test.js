'use strict';
// Only the sampling timer's ticks count. V8 12+ (Node 24) also adds samples
// of its own between ticks, in bursts while a loop calls performance.now();
// recorded with a tick's weight they multiplied that code's time several
// times over and, having no SIGPROF bracket, carried no labels.
const assert = require('assert');
const native = require('../lib/native');
const api = require('../lib');
const { tmpdir, rmdir, profiles, samples, count, has } = require('./native_helpers');

// Wall time spent in a loop that reads performance.now() (a fast API call
// on Node 24) as often as a timing loop does.
function nowCaller(ms) {
  const end = performance.now() + ms;
  let h = 7;
  while (performance.now() < end) {
    for (let i = 0; i < 1000; i++) h = Math.imul(h ^ i, 0x9e3779b1) + (h >>> 13);
  }
  return h;
}

describe('native: only timer ticks are samples', function () {
  this.timeout(60000);
  afterEach(async function () {
    if (native.running()) await native.stop();
  });

  it('a loop calling performance.now() gets at most one sample per tick, all labelled', async function () {
    const dir = tmpdir('ticks');
    const hz = 100;
    try {
      native.start({ application_name: 'ticks', output_dir: dir, sample_rate: hz }, {});
      native.startProfiler('wall', {});
      const t0 = performance.now();
      await api.wrapWithLabels({ loop: 'now' }, async () => {
        nowCaller(300);
        await new Promise((r) => setImmediate(r));
        nowCaller(300);
      });
      const wallMs = performance.now() - t0;
      const st = await native.stop();

      const wall = samples(profiles(dir, 'wall'));
      const mine = (s) => has(s, 'nowCaller');
      const n = count(wall, mine);
      // A loaded machine drops ticks; nothing may add any.
      const most = (wallMs / 1000) * hz * 1.3 + 3;
      assert.ok(n >= 5, `${n} samples in nowCaller (${JSON.stringify(st.join)})`);
      assert.ok(n <= most, `${n} samples in nowCaller over ${wallMs.toFixed(0)} ms at ${hz} Hz ` +
                `(at most ${most.toFixed(0)}): ${JSON.stringify(st.join)}`);
      const labelled = count(wall, (s) => mine(s) && s.labels.loop === 'now');
      assert.strictEqual(labelled, n, `${labelled} of ${n} samples in nowCaller labelled`);
      assert.ok(st.join.joined >= n, JSON.stringify(st.join));
    } finally {
      rmdir(dir);
    }
  });
});
