'use strict';
// expressMiddleware / fastifyMiddleware: the anchor's pull endpoints on real servers,
// the gzipped pprof they return decoded with pprof-format.
const assert = require('assert');
const express = require('express');
const fastify = require('fastify');
const { expressMiddleware, fastifyMiddleware } = require('../lib');
const { decodePprof, burn, loadNative, tmpdir, decodeFolder, samplesOf, count, inFunction } = require('./api-helpers');
const api = require('../lib');

function middlewareBusyLoop() {
  return burn(3);
}

async function get(url) {
  const r = await fetch(url);
  return { status: r.status, body: Buffer.from(await r.arrayBuffer()) };
}

function checkWall(res) {
  assert.strictEqual(res.status, 200);
  const p = decodePprof(res.body);
  // the anchor's pull names (@datadog/pprof's), not its pushed ones (`samples`)
  assert.deepStrictEqual(p.sampleTypes, ['sample/count', 'wall/nanoseconds']);
  assert.strictEqual(p.periodType, 'wall/nanoseconds');
  const busy = p.samples.filter((s) => s.names.some((n) => n.includes('middlewareBusyLoop')));
  assert.ok(busy.length > 0, `no sample in middlewareBusyLoop among ${p.samples.length}`);
  // the anchor's frame naming: "./path:function:line"
  assert.ok(busy[0].names.some((n) => /api-middleware\.test\.js:middlewareBusyLoop:\d+$/.test(n)), busy[0].names.join(' <- '));
}

// A wall profile of the next 0.5 s, asked again until the busy loop is in it (60 s at
// most): on a loaded machine this thread may get too little CPU in one window.
async function pullWall(base) {
  const deadline = Date.now() + 60000;
  for (;;) {
    const res = await get(`${base}/debug/pprof/profile?seconds=0.5`);
    const p = res.status === 200 ? decodePprof(res.body) : null;
    if (!p || Date.now() > deadline ||
        p.samples.some((s) => s.names.some((n) => n.includes('middlewareBusyLoop')))) return res;
  }
}

function checkHeap(res) {
  assert.strictEqual(res.status, 200);
  const p = decodePprof(res.body);
  assert.deepStrictEqual(p.sampleTypes, ['objects/count', 'space/bytes']);
}

describe('api middleware', function () {
  this.timeout(120000);
  let busy;
  beforeEach(() => { busy = setInterval(middlewareBusyLoop, 1); });
  afterEach(() => clearInterval(busy));

  it('express: /debug/pprof/profile?seconds and /debug/pprof/heap', async () => {
    const app = express();
    app.use(expressMiddleware());
    app.get('/other', (req, res) => res.send('other'));
    const server = await new Promise((r) => { const s = app.listen(0, '127.0.0.1', () => r(s)); });
    const base = `http://127.0.0.1:${server.address().port}`;
    try {
      checkWall(await pullWall(base));
      checkHeap(await get(`${base}/debug/pprof/heap`));
      assert.strictEqual((await get(`${base}/debug/pprof/profile?seconds=-1`)).status, 400);
      assert.strictEqual((await get(`${base}/other`)).body.toString(), 'other');
    } finally {
      server.close();
    }
  });

  it('a pull profile does not stop the continuous profiler', async function () {
    if (!loadNative()) this.skip(); // no lib/native.js in this tree (see loadNative)
    const dir = tmpdir('pn-mwlive-');
    api.init({ appName: 'middleware.live', outputDir: dir, uploadInterval: 1 });
    api.start();
    const app = express();
    app.use(expressMiddleware());
    const server = await new Promise((r) => { const s = app.listen(0, '127.0.0.1', () => r(s)); });
    try {
      const base = `http://127.0.0.1:${server.address().port}`;
      checkWall(await pullWall(base));
      checkHeap(await get(`${base}/debug/pprof/heap`));
    } finally {
      server.close();
      await api.stop();
    }
    const continuous = samplesOf(decodeFolder(dir), 'cpu');
    assert.ok(count(continuous, inFunction('middlewareBusyLoop')) > 0,
      'the continuous profile has the busy loop too');
  });

  it('fastify: the same routes as a plugin', async () => {
    const app = fastify();
    app.register(fastifyMiddleware());
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${app.server.address().port}`;
    try {
      checkWall(await pullWall(base));
      checkHeap(await get(`${base}/debug/pprof/heap`));
      assert.strictEqual((await get(`${base}/debug/pprof/profile?seconds=abc`)).status, 400);
    } finally {
      await app.close();
    }
  });
});
