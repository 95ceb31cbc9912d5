'use strict';
// Life cycle: a 60 s soak with 1 s periods (labels, async hops and uploads
// all the time) in a child process, whose RSS must stay flat: the median of
// the last 10 s within 8 MiB of the median at 10-20 s, and no steady climb
// across the run. (Long-lived Node profilers have leaked: grafana/
// pyroscope-nodejs #28, #91.) LIFE_SOAK_SECONDS shortens it by hand; the
// windows scale with it.

const assert = require('node:assert');

const { ingest, profiles, runChild, decodeAll } = require('./life/support');

const SECONDS = Number(process.env.LIFE_SOAK_SECONDS || 60);
const MiB = 1024;

function median(xs) {
  const v = [...xs].sort((a, b) => a - b);
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Median RSS (KiB) of the reports in [from, to) of the run, as fractions.
function windowMedian(points, from, to) {
  const xs = points.filter((p) => p.t >= from * SECONDS && p.t < to * SECONDS)
    .map((p) => p.rss_kib);
  assert.ok(xs.length >= 3, `only ${xs.length} RSS reports in ${from * SECONDS}-${to * SECONDS} s`);
  return median(xs);
}

describe('life cycle: soak', function () {
  this.timeout((SECONDS + 60) * 1000);

  it(`${SECONDS} s with 1 s periods: RSS stays flat, every period uploaded`, async () => {
    const server = await ingest.startIngestServer();
    let r;
    try {
      r = await runChild('soak', { appName: 'life-soak', serverAddress: server.url,
                                   flushIntervalMs: 1000 },
                         { args: [String(SECONDS)], deadlineMs: (SECONDS + 50) * 1000 });
    } finally {
      await server.close();
    }
    assert.strictEqual(r.timedOut, false, `the soak did not end\n${r.stderr}`);
    assert.strictEqual(r.code, 0, `exit ${r.code ?? r.signal}\n${r.stderr}`);
    assert.ok(r.events.some((e) => e.event === 'done'), r.stderr);

    const points = r.events.filter((e) => e.event === 'rss');
    // Six windows of a sixth of the run (10 s each at 60 s); the first is
    // start-up and warm-up.
    const w = [1, 2, 3, 4, 5].map((i) => windowMedian(points, i / 6, (i + 1) / 6));
    const summary = w.map((x) => (x / MiB).toFixed(1)).join(', ');
    assert.ok(w[4] - w[0] < 8 * MiB, `RSS grew ${((w[4] - w[0]) / MiB).toFixed(1)} MiB ` +
              `from 1/6 to the end of the run (window medians, MiB: ${summary})`);
    const steps = w.slice(1).map((x, i) => x - w[i]);
    assert.ok(!steps.every((d) => d > 0.5 * MiB),
              `RSS climbed in every window (medians, MiB: ${summary})`);

    // The periods were exported all along, labels and all.
    const uploads = await decodeAll(server.kept);
    const timed = uploads.filter((u) => u.profiles.some(profiles.isTimeProfile));
    assert.ok(timed.length >= SECONDS / 3,
              `${timed.length} time-profile uploads in ${SECONDS} s of 1 s periods`);
    const routes = new Set();
    for (const u of timed) {
      for (const p of u.profiles.filter(profiles.isTimeProfile)) {
        for (const s of profiles.timeSamples(p)) if (s.labels.route) routes.add(s.labels.route);
      }
    }
    assert.ok(routes.size >= 10, `only ${routes.size} of 20 route labels seen in the uploads`);
    console.log(`      RSS window medians (MiB): ${summary}; ${timed.length} uploads`);
  });
});
