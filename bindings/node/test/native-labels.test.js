'use strict';
// Labels in async context, checked in decoded profiles: across await,
// Promise.all, timers and streams; two concurrent requests never share
// labels; spans from a span source; validation.
const assert = require('assert');
const { Readable, Transform, pipeline } = require('stream');
const native = require('../lib/native');
const { tmpdir, rmdir, profiles, samples, count, has, sleep, spin } = require('./native_helpers');

// Distinct frames, so each sample says which code ran.
function workBeforeAwait(ms) { return spin(ms); }
function workAfterAwait(ms) { return spin(ms); }
function workInTimer(ms) { return spin(ms); }
function workInStream(ms) { return spin(ms); }
function workReqA(ms) { return spin(ms); }
function workReqB(ms) { return spin(ms); }
function workUnlabelled(ms) { return spin(ms); }
function workInSpan(ms) { return spin(ms); }

describe('native: labels', function () {
  afterEach(async function () {
    native.labels.setSpanSource(null);
    if (native.running()) await native.stop();
  });

  it('fixes label names and values the server cannot take (strict off)', function () {
    const inside = (labels) => native.labels.run(labels, () => native.labels.get());
    assert.deepStrictEqual(inside({ __name__: 'x' }), { _name__: 'x' });
    assert.deepStrictEqual(inside({ 'bad-key': 'x' }), { bad_key: 'x' });
    assert.deepStrictEqual(inside({ k: { a: 1 } }), {});
    assert.deepStrictEqual(inside({ k: 'a,b' }), { k: 'a,b' });
    assert.deepStrictEqual(inside('k=v'), {});
    assert.throws(() => native.labels.run({ k: 'v' }), /function/);
  });

  it('reuses interned label sets without mixing them up (the handle cache)', function () {
    const inside = (labels) => native.labels.run(labels, () => native.labels.get());
    // Same names and values in a new object each time: the same set.
    for (let i = 0; i < 3; i++) {
      assert.deepStrictEqual(inside({ a: 'x', b: 'y' }), { a: 'x', b: 'y' });
      assert.deepStrictEqual(inside({ a: 'x' }), { a: 'x' }); // a prefix of the above
      assert.deepStrictEqual(inside({ a: 'x', b: 'z' }), { a: 'x', b: 'z' });
      assert.deepStrictEqual(inside({ b: 'y' }), { b: 'y' });
      assert.deepStrictEqual(inside({}), {});
    }
    // A number and its string are the same value.
    assert.deepStrictEqual(inside({ n: 7 }), { n: '7' });
    assert.deepStrictEqual(inside({ n: '7' }), { n: '7' });
    // A value once valid is checked again when it changes: a cached set
    // never lets a bad value through (it is dropped).
    assert.deepStrictEqual(inside({ a: null }), {});
    assert.deepStrictEqual(inside({ a: 'x', b: ['y'] }), { a: 'x' });
    // A getter is read once per call: the cache keeps what was interned.
    let flips = 0;
    const flip = { get k() { return flips++ % 2 ? 'odd' : 'even'; } };
    assert.deepStrictEqual(inside(flip), { k: 'even' });
    assert.deepStrictEqual(inside(flip), { k: 'odd' });
    assert.deepStrictEqual(inside({ k: 'even' }), { k: 'even' });
    // More sets than the cache holds (256 per base), then the first again,
    // nested under a base and not.
    for (let i = 0; i < 600; i++) {
      assert.deepStrictEqual(inside({ i: String(i) }), { i: String(i) });
    }
    native.labels.run({ base: 'b' }, () => {
      for (let i = 0; i < 600; i += 7) {
        assert.deepStrictEqual(inside({ i }), { base: 'b', i: String(i) });
      }
    });
    assert.deepStrictEqual(inside({ i: '0' }), { i: '0' });
    assert.deepStrictEqual(inside({ a: 'x', b: 'y' }), { a: 'x', b: 'y' });
  });

  it('the async hook runs only once labels are used, while V8 samples', function () {
    // A fresh process: whether labels were ever used is per process.
    const dir = tmpdir('hooklazy');
    const script = `
      const native = require(${JSON.stringify(require.resolve('../lib/native'))});
      const context = require(${JSON.stringify(require.resolve('../lib/context'))});
      const seen = [];
      native.start({ application_name: 'hooklazy', output_dir: ${JSON.stringify(dir)}, upload_interval: 3600 }, {});
      native.startProfiler('cpu', {});
      seen.push(context.hooked());                       // sampling, no labels yet
      native.labels.run({ a: '1' }, () => seen.push(context.hooked()));
      native.stopProfiler('cpu').then(async () => {
        seen.push(context.hooked());                     // labels used, not sampling
        native.startProfiler('cpu', {});
        seen.push(context.hooked());                     // both again
        await native.stop();
        seen.push(context.hooked());
        process.stdout.write(JSON.stringify(seen));
      });`;
    try {
      const out = require('child_process').execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' });
      assert.deepStrictEqual(JSON.parse(out), [false, true, false, true, false]);
    } finally {
      rmdir(dir);
    }
  });

  it('get() returns the wrapper\'s labels after every await, nested ones merged', async function () {
    const seen = await native.labels.run({ route: '/a', n: 1 }, async () => {
      const out = [native.labels.get()];
      await sleep(1);
      out.push(native.labels.get());
      await native.labels.run({ inner: 'yes' }, async () => {
        await null;
        out.push(native.labels.get());
      });
      await Promise.resolve();
      out.push(native.labels.get());
      return out;
    });
    assert.deepStrictEqual(seen, [
      { route: '/a', n: '1' }, { route: '/a', n: '1' },
      { inner: 'yes', n: '1', route: '/a' }, { route: '/a', n: '1' }]);
    assert.deepStrictEqual(native.labels.get(), {});
  });

  it('set() replaces the labels of the current async context', async function () {
    await native.labels.run({ a: '1' }, async () => {
      await null;
      native.labels.set({ b: '2' });
      assert.deepStrictEqual(native.labels.get(), { b: '2' });
      await sleep(1);
      assert.deepStrictEqual(native.labels.get(), { b: '2' });
    });
    assert.deepStrictEqual(native.labels.get(), {});
  });

  it('samples carry their context\'s labels across await, Promise.all, timers and streams', async function () {
    this.timeout(60000);
    const dir = tmpdir('labels');
    try {
      native.start({ application_name: 'labels', output_dir: dir, sample_rate: 250 }, {});
      native.startProfiler('wall', {});
      native.startProfiler('cpu', {});

      const handler = async (name) => {
        workBeforeAwait(120);
        await sleep(5);
        workAfterAwait(120);
        await Promise.all([sleep(2), sleep(3)]);
        if (name === 'a') workReqA(200); else workReqB(200);
      };
      // Two requests interleaved at every await.
      await Promise.all([
        native.labels.run({ req: 'a' }, handler, 'a'),
        native.labels.run({ req: 'b' }, handler, 'b'),
      ]);
      await native.labels.run({ req: 'timer' }, () => new Promise((resolve) => {
        setTimeout(() => { workInTimer(150); resolve(); }, 5);
      }));
      await native.labels.run({ req: 'stream' }, () => new Promise((resolve, reject) => {
        const src = Readable.from([1, 2, 3]);
        const t = new Transform({
          objectMode: true,
          transform(chunk, enc, cb) { workInStream(50); setImmediate(() => cb(null, chunk)); },
        });
        t.resume();
        pipeline(src, t, (err) => (err ? reject(err) : resolve()));
      }));
      // Idle while a request waits: the last callback to run was labelled.
      await native.labels.run({ req: 'sleeper' }, async () => { await null; await sleep(200); });
      workUnlabelled(120);
      const st = await native.stop();
      assert.ok(st.join.joined > 0, JSON.stringify(st.join));

      for (const type of ['cpu', 'wall']) {
        const list = samples(profiles(dir, type));
        const check = (fn, want) => {
          const mine = list.filter((s) => has(s, fn));
          const n = count(mine);
          assert.ok(n >= 3, `${type}: ${fn}: only ${n} samples`);
          const ok = count(mine, (s) => s.labels.req === want);
          // Every sample of this code ran under its context (a sample at
          // the very edge of a function may be unjoined: allow 1 in 10).
          assert.ok(ok >= 0.9 * n,
            `${type}: ${fn}: ${ok}/${n} labelled req=${want}: ` +
            JSON.stringify(mine.map((s) => [s.labels, s.count])));
          return mine;
        };
        check('workReqA', 'a');
        check('workReqB', 'b');
        check('workInTimer', 'timer');
        check('workInStream', 'stream');
        for (const fn of ['workBeforeAwait', 'workAfterAwait']) {
          const mine = list.filter((s) => has(s, fn));
          const n = count(mine);
          assert.ok(n >= 3, `${type}: ${fn}: ${n}`);
          const labelled = count(mine, (s) => s.labels.req === 'a' || s.labels.req === 'b');
          assert.ok(labelled >= 0.9 * n, `${type}: ${fn}: ${labelled}/${n}`);
        }
        // The requests never share labels: no sample with a's code says b.
        assert.strictEqual(count(list, (s) => has(s, 'workReqA') && s.labels.req === 'b'), 0);
        assert.strictEqual(count(list, (s) => has(s, 'workReqB') && s.labels.req === 'a'), 0);
        // The event loop waiting inside a labelled request is nobody's work.
        if (type === 'wall') {
          assert.strictEqual(count(list, (s) => s.stack[0] === '(idle)' && s.labels.req), 0);
        }
        const un = list.filter((s) => has(s, 'workUnlabelled'));
        assert.ok(count(un) >= 3, `${type}: unlabelled: ${count(un)}`);
        assert.strictEqual(count(un, (s) => s.labels.req), 0,
          JSON.stringify(un.map((s) => s.labels)));
      }
    } finally {
      rmdir(dir);
    }
  });

  it('a span source adds its pairs to samples, published on AsyncLocalStorage.run', async function () {
    this.timeout(60000);
    const { AsyncLocalStorage } = require('async_hooks');
    const spans = new AsyncLocalStorage(); // stands in for OpenTelemetry's context manager
    const dir = tmpdir('spans');
    try {
      native.start({ application_name: 'spans', output_dir: dir, sample_rate: 250 }, {});
      native.startProfiler('cpu', {});
      const h1 = native.labels.spanHandle([['span_id', '0123456789abcdef'], ['span_name', 'GET /x']]);
      const h2 = native.labels.spanHandle([['span_id', 'fedcba9876543210'], ['span_name', 'GET /y']]);
      native.labels.setSpanSource(() => spans.getStore());
      const req = (h, name) => native.labels.run({ req: name }, () => spans.run(h, async () => {
        await sleep(2);
        workInSpan(150);
        await null;
        workInSpan(100);
      }));
      await Promise.all([req(h1, 'x'), req(h2, 'y')]);
      await native.stop();
      const list = samples(profiles(dir, 'cpu')).filter((s) => has(s, 'workInSpan'));
      const n = count(list);
      assert.ok(n >= 10, String(n));
      const ok = count(list, (s) => (s.labels.req === 'x' && s.labels.span_id === '0123456789abcdef' &&
        s.labels.span_name === 'GET /x') || (s.labels.req === 'y' && s.labels.span_id === 'fedcba9876543210'));
      assert.ok(ok >= 0.9 * n, `${ok}/${n}: ${JSON.stringify(list.map((s) => [s.labels, s.count]))}`);
      assert.strictEqual(count(list, (s) => s.labels.req === 'x' && s.labels.span_id === 'fedcba9876543210'), 0);
    } finally {
      rmdir(dir);
    }
  });
});
