'use strict';
// Labels through the public API: wrapWithLabels/getLabels/setLabels across await,
// Promise.all, timers and streams, concurrent calls apart; then the samples of a real
// profile (folder output, decoded with pprof-format) carry the labels after an await.
const assert = require('assert');
const { Readable, Transform, pipeline } = require('stream');
const { setTimeout: sleep, setImmediate: tick } = require('timers/promises');
const { loadNative, tmpdir, decodeFolder, samplesOf, count, burn, inFunction } = require('./api-helpers');

const native = loadNative();
const api = require('../lib');

describe('api labels', function () {
  this.timeout(60000);
  before(function () {
    if (!native) this.skip(); // no lib/native.js in this tree (see loadNative)
  });

  it('hold across await, Promise.all, timers and streams', async () => {
    const seen = await api.wrapWithLabels({ route: '/a', n: 7 }, async (x) => {
      const out = { arg: x, start: api.getLabels() };
      await sleep(5);
      out.afterAwait = api.getLabels();
      out.all = await Promise.all([1, 2, 3].map(async (i) => { await tick(); await sleep(i); return api.getLabels().route; }));
      out.timer = await new Promise((r) => setTimeout(() => r(api.getLabels().route), 2));
      out.stream = await new Promise((resolve, reject) => {
        const got = [];
        pipeline(
          Readable.from(['a', 'b']),
          new Transform({ transform(c, e, cb) { got.push(api.getLabels().route); cb(null, c); } }),
          async function* (src) { for await (const c of src) yield c; },
          (err) => (err ? reject(err) : resolve(got)));
      });
      return out;
    }, 'arg');
    assert.strictEqual(seen.arg, 'arg');
    assert.deepStrictEqual(seen.start, { route: '/a', n: '7' });
    assert.deepStrictEqual(seen.afterAwait, { route: '/a', n: '7' });
    assert.deepStrictEqual(seen.all, ['/a', '/a', '/a']);
    assert.strictEqual(seen.timer, '/a');
    assert.deepStrictEqual(seen.stream, ['/a', '/a']);
    assert.deepStrictEqual(api.getLabels(), {}, 'outside the wrapper: no labels');
  });

  it('nest (inner wins, outer restored) and keep concurrent calls apart', async () => {
    const run = (id) => api.wrapWithLabels({ req: id, tier: 'outer' }, async () => {
      const seen = [];
      for (let i = 0; i < 5; i++) {
        await tick();
        seen.push(api.getLabels().req);
        await api.wrapWithLabels({ tier: 'inner' }, async () => {
          await sleep(1);
          seen.push(`${api.getLabels().req}/${api.getLabels().tier}`);
        });
        seen.push(api.getLabels().tier);
      }
      return seen;
    });
    const [a, b] = await Promise.all([run('A'), run('B')]);
    assert.deepStrictEqual(a, Array(5).fill(['A', 'A/inner', 'outer']).flat());
    assert.deepStrictEqual(b, Array(5).fill(['B', 'B/inner', 'outer']).flat());
  });

  it('setLabels replaces the current context\'s labels; getWallLabels/setWallLabels alias them', async () => {
    await api.wrapWithLabels({ a: '1' }, async () => {
      api.setLabels({ b: '2' });
      await tick();
      assert.deepStrictEqual(api.getLabels(), { b: '2' });
      api.setWallLabels({ c: 3 });
      assert.deepStrictEqual(api.getWallLabels(), { c: '3' });
    });
  });

  // Issue 28, a documented difference (docs/node.md): the anchor's setLabels was
  // process-wide (one "last context" for every sample, so a timer created before it
  // was labelled, and concurrent requests overwrote each other's). Here it replaces
  // the labels of the current async context and of what that context starts later.
  it('setLabels is per async context: an earlier timer and a concurrent request keep theirs', async () => {
    const seenByTimer = [];
    await new Promise((resolve) => {
      api.wrapWithLabels({}, () => {
        const timer = setInterval(() => {
          seenByTimer.push(api.getLabels());
          if (seenByTimer.length === 2) {
            clearInterval(timer);
            resolve();
          }
        }, 5);
        // a sibling context sets labels after the timer was created
        setImmediate(() => api.setLabels({ later: 'yes' }));
      });
    });
    assert.deepStrictEqual(seenByTimer, [{}, {}], 'the anchor would have shown {later: "yes"}');
    const request = (name) => api.wrapWithLabels({}, async () => {
      api.setLabels({ request: name });
      await tick();
      await tick();
      return api.getLabels();
    });
    const [a, b] = await Promise.all([request('a'), request('b')]);
    assert.deepStrictEqual([a, b], [{ request: 'a' }, { request: 'b' }]);
  });

  // Issue 28: labels never fail a request. What the anchor's users pass (req.user?.id,
  // req.url, booleans) runs; what the server cannot take is fixed or dropped, counted.
  const DROPIN_CASES = [
    // [labels given, labels the samples carry]
    [{ user: undefined }, {}],
    [{ user: null }, {}],
    [{ user: '' }, {}],
    [{ flag: true, n: 5, big: 10n }, { flag: 'true', n: '5', big: '10' }],
    [{ url: '/a?b=c,d{e}' }, { url: '/a?b=c,d{e}' }], // per-sample values may hold { } , =
    [{ 'user-id': '7' }, { user_id: '7' }],
    [{ __reserved: 'x' }, { _reserved: 'x' }],
    [{ 'bad key': 'x' }, { bad_key: 'x' }],
    [{ '9lives': 'x' }, { _9lives: 'x' }],
    [{ k: {} }, {}],
    [{ k: ['y'] }, {}],
    [{ k: Symbol('s') }, {}],
    [{ long: 'x'.repeat(3000) }, { long: 'x'.repeat(2048) }],
    [{ nul: 'a\0b' }, { nul: 'a\ufffdb' }],
    [{ lone: 'a\ud800b' }, { lone: 'a\ufffdb' }],
    [null, {}],
    [undefined, {}],
    ['k=v', {}],
  ];

  it('never throws for labels the anchor took: fixed or dropped, counted in stats()', () => {
    api.getLabels(); // loads the addon: stats() has its counters
    const before = api.stats().labels;
    for (const [given, want] of DROPIN_CASES) {
      const got = api.wrapWithLabels(given, (x) => [x, api.getLabels()], 'arg');
      assert.deepStrictEqual(got, ['arg', want], `wrapWithLabels(${String(JSON.stringify(given, (k, v) => typeof v === 'bigint' || typeof v === 'symbol' ? String(v) : v))})`);
      api.wrapWithLabels({}, () => { api.setLabels(given); assert.deepStrictEqual(api.getLabels(), want); });
    }
    const many = {};
    for (let i = 0; i < 120; i++) many[`k${i}`] = 'v';
    assert.strictEqual(Object.keys(api.wrapWithLabels(many, () => api.getLabels())).length, 100);
    const after = api.stats().labels;
    assert.ok(after.coerced - before.coerced >= 2 * 6, JSON.stringify([before, after]));
    assert.ok(after.dropped - before.dropped >= 2 * 7 + 20, JSON.stringify([before, after]));
  });

  it('strictLabels: true makes them errors naming the label', async () => {
    const dir = tmpdir('pn-strict-');
    api.init({ appName: 'strict.test', outputDir: dir, strictLabels: true });
    api.start();
    try {
      assert.throws(() => api.wrapWithLabels({ __reserved: 'x' }, () => 0), /__reserved/);
      assert.throws(() => api.wrapWithLabels({ 'bad key': 'x' }, () => 0), /bad key/);
      assert.throws(() => api.wrapWithLabels({ k: {} }, () => 0), /"k"/);
      assert.throws(() => api.wrapWithLabels({ k: undefined }, () => 0), /"k"/);
      assert.throws(() => api.wrapWithLabels('k=v', () => 0), TypeError);
      assert.strictEqual(api.wrapWithLabels({ k: 'a=b' }, () => api.getLabels().k), 'a=b');
    } finally {
      await api.stop();
    }
  });

  it('samples after an await carry the wrapper\'s labels; concurrent requests do not mix', async () => {
    const dir = tmpdir('pn-labels-');
    api.init({ appName: 'labels.test', outputDir: dir, uploadInterval: 1 });
    api.start();
    function burnBeforeAwait() { return burn(150); }
    function burnAfterAwait() { return burn(150); }
    function burnUnlabelled() { return burn(150); }
    function burnRequestA() { return burn(25); }
    function burnRequestB() { return burn(25); }
    try {
      for (let round = 0; round < 3; round++) {
        await api.wrapWithLabels({ handler: 'h' }, async () => {
          burnBeforeAwait();
          await sleep(1);
          burnAfterAwait();
        });
        burnUnlabelled();
      }
      const request = (id, fn) => api.wrapWithLabels({ req: id }, async () => {
        for (let i = 0; i < 12; i++) { fn(); await tick(); }
      });
      await Promise.all([request('A', burnRequestA), request('B', burnRequestB)]);
    } finally {
      await api.stop();
    }
    const samples = samplesOf(decodeFolder(dir), 'cpu');
    const share = (name, pred) => {
      const all = count(samples, inFunction(name));
      const hit = count(samples, (s) => inFunction(name)(s) && pred(s.labels));
      return { all, hit };
    };
    for (const name of ['burnBeforeAwait', 'burnAfterAwait']) {
      const { all, hit } = share(name, (l) => l.handler === 'h');
      assert.ok(all > 0, `no samples in ${name}`);
      assert.ok(hit >= 0.9 * all, `${name}: ${hit} of ${all} labelled`);
    }
    const un = share('burnUnlabelled', (l) => 'handler' in l);
    assert.ok(un.all > 0 && un.hit <= 0.1 * un.all, `burnUnlabelled: ${un.hit} of ${un.all} labelled`);
    for (const [name, id, other] of [['burnRequestA', 'A', 'B'], ['burnRequestB', 'B', 'A']]) {
      const mine = share(name, (l) => l.req === id);
      const wrong = share(name, (l) => l.req === other);
      assert.ok(mine.all > 0 && mine.hit >= 0.9 * mine.all, `${name}: ${mine.hit} of ${mine.all} with req=${id}`);
      assert.strictEqual(wrong.hit, 0, `${name}: ${wrong.hit} samples with req=${other}`);
    }
  });
});
