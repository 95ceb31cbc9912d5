'use strict';
// Life cycle: every upload says the rate it was sampled at (sampleRate in
// the query, and the pprof period), and the samples it holds agree with it.
// (@pyroscope/nodejs 0.6.4 says sampleRate=17 while sampling at 100 Hz.)

const assert = require('node:assert');

const { ingest, profiles, runChild, samplesIn, decodeAll } = require('./life/support');

const CASES = [
  { name: 'the default', settings: {}, hz: 100 },
  { name: 'sampleRate: 50', settings: { sampleRate: 50 }, hz: 50 },
  { name: 'wall.samplingIntervalMicros: 4000', settings: { wall: { samplingIntervalMicros: 4000 } },
    hz: 250 },
];

describe('life cycle: uploads carry the true sampleRate', function () {
  this.timeout(90e3);
  let server;

  before(async () => { server = await ingest.startIngestServer(); });
  after(() => server.close());

  for (const c of CASES) {
    it(`${c.name}: sampleRate=${c.hz}`, async () => {
      server.kept.length = 0;
      const app = `life-rate-${c.hz}`;
      const r = await runChild('rate', { appName: app, serverAddress: server.url,
                                         flushIntervalMs: 600000, ...c.settings });
      assert.strictEqual(r.code, 0, `exit ${r.code ?? r.signal}\n${r.stderr}`);
      const worked = r.events.find((e) => e.event === 'worked');
      const uploads = (await decodeAll(server.kept)).filter((u) => u.app === app);
      const timed = uploads.filter((u) => u.profiles.some(profiles.isTimeProfile));
      assert.ok(timed.length >= 1, `no time profile uploaded (${uploads.length} uploads)`);
      for (const u of timed) {
        assert.strictEqual(u.query.sampleRate, String(c.hz), `query: ${JSON.stringify(u.query)}`);
        for (const p of u.profiles.filter(profiles.isTimeProfile)) {
          const unit = p.stringTable.strings[Number(p.periodType.unit)];
          if (unit === 'nanoseconds') {
            assert.ok(Math.abs(Number(p.period) - 1e9 / c.hz) <= 1,
                      `period ${p.period} ns, expected ${1e9 / c.hz}`);
          }
        }
      }
      // The samples agree with the rate: V8 samples on a wall-clock tick,
      // so the work's wall seconds x Hz, within wide margins. A loaded
      // machine drops the ticks that find the thread waiting for a CPU
      // (nothing adds them), so the floor follows the CPU the work got.
      const n = samplesIn(timed.flatMap((u) => u.profiles), 'lifeWorkRate');
      const expected = worked.wall_s * c.hz;
      const floor = Math.min(worked.wall_s, worked.cpu_s) * c.hz * 0.25;
      assert.ok(n >= floor && n <= expected * 1.6,
                `${n} samples in lifeWorkRate for ${worked.wall_s.toFixed(2)} s of work at ` +
                `${c.hz} Hz, ${worked.cpu_s.toFixed(2)} s of CPU (expected about ${expected.toFixed(0)})`);
    });
  }
});
