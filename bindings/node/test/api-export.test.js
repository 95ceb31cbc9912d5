'use strict';
// Profiles out of the public API: uploads to a loopback ingest server (through node's
// http: the raw body with format=pprof; pprof decoded with pprof-format), and folder
// output with source-mapped frames.
const assert = require('assert');
const path = require('path');
const { setImmediate: tick } = require('timers/promises');
const { loadNative, tmpdir, decodeFolder, samplesOf, count, ingestServer, burn, inFunction } = require('./api-helpers');

const native = loadNative();
const api = require('../lib');

describe('api export', function () {
  this.timeout(60000);
  before(function () {
    if (!native) this.skip(); // no lib/native.js in this tree (see loadNative)
  });
  afterEach(() => api.stop());

  it('uploads to the server with the true sampleRate, tags, auth token and tenant', async () => {
    const server = await ingestServer();
    try {
      api.init({
        appName: 'upload.test', serverAddress: server.url, authToken: 'secret-token',
        tenantID: 'tenant-1', tags: { env: 'test', shard: 2, 'otel.scope.version': 'pinned' }, flushIntervalMs: 1000,
        wall: { samplingIntervalMicros: 5000 },
      });
      api.start();
      function burnForUpload() { return burn(200); }
      burnForUpload();
      assert.strictEqual(await api.flush(20), true);
      burnForUpload();
      await api.stop();
      await server.waitFor((reqs) => reqs.some((r) => r.pprof && r.pprof.samples.length > 0));
    } finally {
      await server.close();
    }
    const reqs = server.requests.filter((r) => r.pprof);
    assert.ok(reqs.length > 0, JSON.stringify(server.requests.map((r) => r.error)));
    for (const r of reqs) {
      assert.strictEqual(r.path, '/ingest');
      assert.match(r.query.name, /^upload\.test\{.*env=test/);
      assert.match(r.query.name, /shard=2/);
      // the series tags @pyroscope/nodejs 0.6.4 adds to every upload; a user's tag of
      // the same name wins
      const tags = Object.fromEntries(r.query.name.replace(/^[^{]*\{|\}$/g, '').split(',')
        .map((kv) => kv.split('=')));
      assert.strictEqual(tags['otel.scope.name'], 'pyroscope-native/nodejs');
      assert.strictEqual(tags['otel.scope.version'], 'pinned');
      assert.strictEqual(tags['process.runtime.name'], 'nodejs');
      assert.strictEqual(tags['process.runtime.version'], process.versions.node);
      assert.strictEqual(r.query.sampleRate, '200');
      assert.strictEqual(r.query.spyName, 'nodespy');
      // node's http sends the anchor's shape: the profile is the body
      assert.strictEqual(r.shape, 'raw');
      assert.strictEqual(r.query.format, 'pprof');
      assert.strictEqual(r.headers['content-type'], 'application/octet-stream');
      assert.strictEqual(r.headers.authorization, 'Bearer secret-token');
      assert.strictEqual(r.headers['x-scope-orgid'], 'tenant-1');
    }
    const samples = reqs.flatMap((r) => r.pprof.samples);
    assert.ok(count(samples, inFunction('burnForUpload')) > 0,
      'the burning function is in the uploads');
  });

  it('writes decodable profiles to outputDir, source-mapped, with stripFilenames', async () => {
    const dir = tmpdir('pn-folder-');
    const fixture = path.join(__dirname, 'fixtures', 'sourcemap');
    const sourceMapper = await api.SourceMapper.create([fixture]);
    api.init({ appName: 'folder.test', outputDir: dir, uploadInterval: 1, sourceMapper, stripFilenames: 'dependencies' });
    api.start();
    const { spinTyped } = require(path.join(fixture, 'dist', 'work.js'));
    const { StringTable } = require('pprof-format'); // a dependency: its file name is stripped
    const burnInDependency = () => { const t = new StringTable(); for (let i = 0; i < 20000; i++) t.dedup(`s${i}`); };
    const end = process.cpuUsage().user + 600e3;
    while (process.cpuUsage().user < end) {
      spinTyped({ rounds: 200000 });
      burnInDependency();
      await tick();
    }
    await api.stop();
    const profiles = decodeFolder(dir);
    assert.ok(profiles.length > 0, 'no profile written');
    const samples = samplesOf(profiles, 'cpu');
    const mapped = samples.filter((s) => s.frames.some((f) => /src\/work\.ts:spinTyped:6$/.test(f.name)));
    assert.ok(mapped.length > 0, 'no source-mapped frame among ' +
      [...new Set(samples.flatMap((s) => s.names))].filter((n) => n.includes('work')).join(', '));
    const frame = mapped[0].frames.find((f) => f.name.endsWith('spinTyped:6'));
    assert.strictEqual(frame.file, path.join(fixture, 'src', 'work.ts'));
    const dep = samples.flatMap((s) => s.frames).filter((f) => f.name.includes('node_modules/pprof-format/'));
    assert.ok(dep.length > 0, 'no sample in the dependency');
    assert.ok(dep.every((f) => f.file === ''), 'dependency file names are stripped');
    assert.ok(!samples.some((s) => s.frames.some((f) => f.file.includes('node_modules/'))));
  });

  it('the last profile, recorded at stop(), has its frames mapped too (stripFilenames)', async () => {
    // stop() restarts the V8 profile (recording what came before) and then
    // ends the new one: the recording's own CPU lands in that last profile.
    // A source mapper slow on its first lookup after `slow` is set makes
    // sure it holds samples; each must have its file name stripped.
    const dir = tmpdir('pn-final-');
    let slow = false;
    const sourceMapper = {
      mappingInfo(f) {
        if (slow) {
          slow = false;
          const end = process.cpuUsage().user + 150e3;
          while (process.cpuUsage().user < end) { /* CPU inside the recording */ }
        }
        return f;
      },
    };
    api.init({ appName: 'final.test', outputDir: dir, uploadInterval: 10, sourceMapper, stripFilenames: 'all' });
    api.startCpuProfiling(); // CPU only: no heap snapshot to ask the mapper first
    await tick();
    // A function no earlier profile sampled: its frame is looked up (slowly) at stop().
    function burnBeforeStop() { return burn(150); }
    burnBeforeStop();
    slow = true;
    await api.stop();
    assert.strictEqual(slow, false, 'the source mapper was not asked at stop()');
    const samples = samplesOf(decodeFolder(dir), 'cpu');
    assert.ok(samples.length > 0, 'no cpu samples written');
    const raw = samples.flatMap((s) => s.frames).filter((f) => f.file !== '');
    assert.deepStrictEqual([...new Set(raw.map((f) => f.file))], [], 'frames recorded without the mapper');
  });

  it('start() also writes heap profiles (heap.samplingIntervalBytes honoured)', async () => {
    const dir = tmpdir('pn-heap-');
    api.init({ appName: 'heap.test', outputDir: dir, uploadInterval: 1, heap: { samplingIntervalBytes: 16384 } });
    api.start();
    const keep = [];
    function allocateRetained() { for (let i = 0; i < 20000; i++) keep.push({ i, s: 'x'.repeat(64) + i }); }
    for (let r = 0; r < 5; r++) { allocateRetained(); await tick(); }
    await api.stop();
    const heap = decodeFolder(dir).filter((p) => p.sampleTypes.includes('inuse_space/bytes'));
    assert.ok(heap.length > 0, 'no heap profile');
    const mine = samplesOf(heap).filter(inFunction('allocateRetained'));
    assert.ok(mine.length > 0, 'no heap sample in allocateRetained');
    assert.ok(keep.length === 100000);
  });

  it('wall.collectCpuTime: start() writes wall profiles with CPU time in them', async () => {
    const dir = tmpdir('pn-cputime-');
    api.init({ appName: 'cputime.test', outputDir: dir, uploadInterval: 1, wall: { collectCpuTime: true } });
    api.start();
    burn(100);
    await api.stop();
    const types = decodeFolder(dir).map((p) => p.sampleTypes);
    assert.ok(types.some((t) => t.includes('wall/nanoseconds') && t.includes('cpu/nanoseconds')), JSON.stringify(types));
  });

  it('startWallProfiling alone writes a wall profile; stopWallProfiling stops it', async () => {
    const dir = tmpdir('pn-wall-');
    api.init({ appName: 'wall.test', outputDir: dir, uploadInterval: 1 });
    api.startWallProfiling();
    function burnForWall() { return burn(200); }
    burnForWall();
    await api.stopWallProfiling();
    await api.stop();
    const profiles = decodeFolder(dir);
    const wall = samplesOf(profiles, 'wall');
    assert.ok(count(wall, inFunction('burnForWall')) > 0,
      `no wall samples in burnForWall (files: ${profiles.map((p) => p.file).join(', ')})`);
  });
});
