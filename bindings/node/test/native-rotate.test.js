'use strict';
// The V8 profile restarts once per period, just after the core cuts it
// (sampler.js), not every 2 s: every period is still exported with its
// samples and none arrives late.
const assert = require('assert');
const native = require('../lib/native');
const sampler = require('../lib/sampler');
const addon = require('../lib/addon');
const { tmpdir, rmdir, profiles, samples, count, has, sleep, spin } = require('./native_helpers');

function rotateBurner(ms) { return spin(ms); }

describe('native: one profile restart per period', function () {
  this.timeout(60000);
  afterEach(async function () {
    if (native.running()) await native.stop();
  });

  it('plans restarts at the cuts, and in between only for periods over 10 s', function () {
    assert.strictEqual(sampler.rotateDelay(5000, 4900), 4900);
    assert.strictEqual(sampler.rotateDelay(5000, 0.5), 5000.5);
    assert.strictEqual(sampler.rotateDelay(400, 150), 150);
    // 60 s periods: six restarts, 10 s apart, the last just after the cut
    assert.strictEqual(sampler.rotateDelay(60000, 59000), 9000);
    assert.strictEqual(sampler.rotateDelay(60000, 9000), 9000);
    // 15 s periods: two, 7.5 s apart
    assert.strictEqual(sampler.rotateDelay(15000, 14000), 6500);
    assert.throws(() => addon.joinNextCutMs(0, 100), /joinNextCutMs/);
  });

  it('restarts about once per period; each period is sealed with its samples', async function () {
    const dir = tmpdir('rotate');
    try {
      native.start({ application_name: 'rotate', output_dir: dir, upload_interval: 0.4 }, {});
      native.startProfiler('cpu', {});
      const up = native.stats().periods;
      const r0 = sampler.costs().rotations;
      const next = addon.joinNextCutMs(400, 100);
      assert.ok(next > 0 && next <= 400, String(next));
      // Burn in slices, the event loop free between them, until the core
      // has exported 6 periods (an event, however slow the machine).
      const deadline = Date.now() + 30000;
      while (native.stats().periods - up < 6 && Date.now() < deadline) {
        rotateBurner(20);
        await sleep(5);
      }
      const periods = native.stats().periods - up;
      const rotations = sampler.costs().rotations - r0;
      assert.ok(periods >= 6, `${periods} periods exported`);
      // A restart every 2 s at most would be every 200 ms here: 2 a period.
      assert.ok(rotations >= periods - 1 && rotations <= periods + 2,
        `${rotations} restarts for ${periods} periods`);
      const st = await native.stop();
      assert.strictEqual(st.lateSamples, 0, JSON.stringify(st));
      const profs = profiles(dir, 'cpu');
      assert.ok(profs.length >= 6, `${profs.length} cpu profiles`);
      // every period but the first and the last (partial) ones has samples of the burner
      const withBurner = profs.filter((p) => count(samples([p]), (s) => has(s, 'rotateBurner')) > 0);
      assert.ok(withBurner.length >= profs.length - 2, `${withBurner.length} of ${profs.length} periods`);
    } finally {
      rmdir(dir);
    }
  });
});
