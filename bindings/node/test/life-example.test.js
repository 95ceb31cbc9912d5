'use strict';
// The example app (examples/node/shop.js, what `make demo-node` runs) as a
// user runs it: it ends by itself, writes its profiles to the folder, and
// the work after its `await` carries the request's endpoint and span.

const assert = require('node:assert');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { ROOT, profiles } = require('./life/support');

const HANDLERS = ['parseOrder', 'priceCart', 'renderReceipt'];

function run(args, deadlineMs) {
  const env = Object.fromEntries(Object.entries(process.env)
    .filter(([k]) => !k.startsWith('PYROSCOPE_') && !k.startsWith('OTEL_')));
  const child = spawn(process.execPath, [path.join(ROOT, 'examples', 'node', 'shop.js'), ...args],
                      { env, cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c) => { out += c; });
  child.stderr.on('data', (c) => { out += c; });
  const timer = setTimeout(() => child.kill('SIGKILL'), deadlineMs);
  return new Promise((resolve) => child.on('close', (code, signal) => {
    clearTimeout(timer);
    resolve({ code, signal, out });
  }));
}

describe('life cycle: the example app', function () {
  // One run of the app, shared by the checks below: per handler function,
  // its samples, those with the request's endpoint, those with its span.
  let tally;
  let output;
  before(async function () {
    this.timeout(90e3);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pn-life-example-'));
    try {
      const r = await run(['--seconds', '2', '--output-dir', dir], 60e3);
      output = r.out;
      assert.strictEqual(r.code, 0, `exit ${r.code ?? r.signal}\n${r.out}`);
      assert.match(r.out, /shop: served \d+ requests/);
      tally = {};
      for (const { profile } of profiles.decodeFolder(dir)) {
        if (!profiles.isTimeProfile(profile)) continue;
        for (const s of profiles.timeSamples(profile)) {
          const leaf = profiles.frameFunction(s.frames[0] || '');
          if (!HANDLERS.includes(leaf)) continue;
          const t = (tally[leaf] ||= { all: 0, endpoint: 0, span: 0 });
          t.all += s.count;
          if (s.labels.endpoint === '/checkout' || s.labels.endpoint === '/cart') t.endpoint += s.count;
          if (s.labels.span_id && /^POST \/(checkout|cart)$/.test(s.labels.span_name)) t.span += s.count;
        }
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  const sum = (fns, k) => fns.reduce((n, fn) => n + tally[fn][k], 0);

  it('ends by itself with every handler step in the folder\'s profiles', () => {
    for (const fn of HANDLERS) {
      assert.ok(tally[fn] && tally[fn].all >= 3,
                `too few samples in ${fn}: ${JSON.stringify(tally)}\n${output}`);
    }
  });

  // A sample V8 took outside any SIGPROF bracket may stay unlabelled: 90 %.
  it('labels the work after the await with the request\'s endpoint', () => {
    const after = ['priceCart', 'renderReceipt'];
    assert.ok(sum(after, 'endpoint') >= 0.9 * sum(after, 'all'),
              `post-await samples with endpoint: ${JSON.stringify(tally)}`);
  });

  it('labels every request\'s work with its OpenTelemetry span, endpoint too', () => {
    assert.ok(sum(HANDLERS, 'span') >= 0.9 * sum(HANDLERS, 'all'),
              `handler samples with their span: ${JSON.stringify(tally)}`);
  });
});
