'use strict';
// native.js: settings, errors naming the setting, life cycle, logs, stats.
const assert = require('assert');
const fs = require('fs');
const native = require('../lib/native');
const { tmpdir, rmdir, profiles, samples, spin, spinUntilSampled } = require('./native_helpers');

describe('native: settings and life cycle', function () {
  afterEach(async function () {
    native.setLogHandler(null);
    if (native.running()) await native.stop();
  });

  it('lists the core settings table', function () {
    const names = native.settingTable().map((r) => r.name);
    for (const n of ['application_name', 'server_address', 'sample_rate', 'upload_interval',
      'tags', 'output_dir', 'stop_timeout', 'tenant_id']) {
      assert.ok(names.includes(n), n);
    }
  });

  it('rejects bad settings with an error naming the setting', function () {
    const dir = '/nonexistent-pn';
    const cases = [
      [{ application_name: 'a', output_dir: dir, no_such_setting: 1 }, /no_such_setting/],
      [{ application_name: 'a', output_dir: dir, sample_rate: 'fast' }, /sample_rate/],
      [{ application_name: 'a', output_dir: dir, upload_interval: 'soon' }, /upload_interval/],
      [{ application_name: 'a', output_dir: dir, tags: { __reserved: 'x' } }, /__reserved/],
      [{ application_name: 'a', output_dir: dir, tags: { ok: 'a,b' } }, /ok/],
      [{ application_name: 'a', output_dir: dir, tags: [['k', 'v']] }, /tags must be an object of string values, not an array/],
      [{ application_name: 'a', output_dir: dir, oncpu: {} }, /oncpu/],
      [{ application_name: 'bad name{', output_dir: dir }, /application_name/],
    ];
    for (const [settings, re] of cases) {
      assert.throws(() => native.checkSettings(settings, {}), (e) => {
        assert.match(e.message, re);
        assert.match(e.code, /ERR_PYROSCOPE_CONFIG|ERR_INVALID_ARG_TYPE/);
        return true;
      }, JSON.stringify(settings));
      assert.throws(() => native.start(settings, {}), re);
      assert.strictEqual(native.running(), false);
    }
  });

  it('applies the environment first and lets settings win', async function () {
    assert.throws(() => native.checkSettings({ application_name: 'a', output_dir: '/x' },
      { PYROSCOPE_SAMPLE_RATE: 'abc' }), /PYROSCOPE_SAMPLE_RATE.*sample_rate/);
    native.checkSettings({ output_dir: '/x' }, { PYROSCOPE_APPLICATION_NAME: 'from-env' });
    // No name at all: unknown_service, as the server named the anchor's '' (issue 28 §2).
    assert.strictEqual(native.resolveSettings({ output_dir: '/x' }, {}).application_name, 'unknown_service');
    const dir = tmpdir('env');
    try {
      native.start({ output_dir: dir }, { PYROSCOPE_APPLICATION_NAME: 'fromenv' });
      native.startProfiler('wall', {});
      spinUntilSampled(native, 5);
      await native.stop();
      native.start({ output_dir: dir, application_name: 'fromsettings' },
        { PYROSCOPE_APPLICATION_NAME: 'fromenv2' });
      native.startProfiler('wall', {});
      spinUntilSampled(native, 5);
      await native.stop();
      const files = fs.readdirSync(dir);
      assert.ok(files.some((f) => f.startsWith('fromenv-wall-')), files.join());
      assert.ok(files.some((f) => f.startsWith('fromsettings-wall-')), files.join());
      assert.ok(!files.some((f) => f.startsWith('fromenv2-')), files.join());
    } finally {
      rmdir(dir);
    }
  });

  it('starts, joins on a second start (nothing started), stops, restarts', async function () {
    const dir = tmpdir('life');
    try {
      assert.throws(() => native.startProfiler('cpu', {}), /start\(\) the agent first/);
      assert.strictEqual(native.start({ application_name: 'life', output_dir: dir }, {}), 'owner');
      assert.strictEqual(native.running(), true);
      // one runs: the second start() starts nothing and says so (threads starting at once)
      assert.strictEqual(native.start({ application_name: 'other', output_dir: dir }, {}), 'joined');
      assert.strictEqual(native.agentOwned(), true);
      assert.throws(() => native.startProfiler('gpu', {}), /kind/);
      native.startProfiler('cpu', {});
      spin(150);
      const st = await native.stop();
      assert.strictEqual(native.running(), false);
      assert.ok(st && st.join.profiles >= 1, JSON.stringify(st));
      assert.strictEqual(await native.stop(), null);
      assert.strictEqual(await native.flush(1), false);
      native.start({ application_name: 'life2', output_dir: dir }, {});
      native.startProfiler('wall', {});
      spinUntilSampled(native, 5);
      assert.strictEqual(await native.flush(10), true);
      await native.stopProfiler('wall');
      await native.stop();
      const files = fs.readdirSync(dir);
      assert.ok(files.some((f) => f.startsWith('life-cpu-')), files.join());
      assert.ok(!files.some((f) => f.startsWith('other-')), files.join());
      assert.ok(files.some((f) => f.startsWith('life2-wall-')), files.join());
      assert.ok(samples(profiles(dir, 'wall')).length > 0);
    } finally {
      rmdir(dir);
    }
  });

  it('flush() is false when an upload of that flush failed, true again after', async function () {
    this.timeout(60000);
    const http = require('http');
    const bodies = [];
    let status = 400;
    const server = http.createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        bodies.push({ url: req.url, status, bytes: Buffer.concat(chunks).length });
        res.writeHead(status);
        res.end();
      });
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    try {
      native.start({ application_name: 'flushy', server_address: `http://127.0.0.1:${server.address().port}`,
        sample_rate: 200 }, {});
      native.startProfiler('wall', {});
      spinUntilSampled(native, 5);
      assert.strictEqual(await native.flush(30), false);
      status = 200;
      spinUntilSampled(native, 5);
      assert.strictEqual(await native.flush(30), true);
      await native.stop();
      assert.ok(bodies.some((b) => b.status === 400) && bodies.some((b) => b.status === 200),
        JSON.stringify(bodies));
      const ok = bodies.find((b) => b.status === 200);
      assert.match(ok.url, /^\/ingest\?name=flushy.*sampleRate=200/);
      assert.match(ok.url, /spyName=nodespy/);
    } finally {
      server.close();
    }
  });

  it('hands core log messages to the log handler', async function () {
    const got = [];
    native.setLogHandler((level, msg) => got.push([level, msg]));
    native.start({ application_name: 'logs', output_dir: tmpdir('logs'), log_level: 'debug' },
      { PYROSCOPE_NO_SUCH_VARIABLE: '1' });
    const dir = native.stats();
    assert.ok(dir);
    const deadline = Date.now() + 20000;
    while (!got.some(([, m]) => /PYROSCOPE_NO_SUCH_VARIABLE/.test(m)) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const hit = got.find(([, m]) => /PYROSCOPE_NO_SUCH_VARIABLE/.test(m));
    assert.ok(hit, JSON.stringify(got));
    assert.strictEqual(hit[0], 30);
    assert.throws(() => native.setLogHandler(42), /function/);
  });

  it('a throwing log handler does not break the process', async function () {
    native.setLogHandler(() => { throw new Error('boom'); });
    native.start({ application_name: 'logs', output_dir: tmpdir('logs2') },
      { PYROSCOPE_ANOTHER_UNKNOWN: '1' });
    await new Promise((r) => setTimeout(r, 100));
    await native.stop();
  });
});
