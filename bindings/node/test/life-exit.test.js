'use strict';
// Life cycle: a script that calls start() and never stop() ends by itself
// (the package's timers and handles are unref'd), and the period it was in
// is exported at exit -- to the folder, and to a server.

const assert = require('node:assert');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const { ingest, profiles, runChild, samplesIn, decodeAll } = require('./life/support');

// The only export the child can make is the one at exit: its periods are
// far longer than its run.
const LONG_PERIOD = { flushIntervalMs: 600000 };

function assertExitedByItself(r) {
  assert.strictEqual(r.timedOut, false,
                     'the process did not end by itself within 60 s (a timer or handle of the ' +
                     `profiler keeps it alive)\n${r.stderr}`);
  assert.strictEqual(r.code, 0, `exit ${r.code ?? r.signal}\n${r.stderr}`);
  const worked = r.events.find((e) => e.event === 'worked');
  assert.ok(worked, `the child never finished its work\n${r.stderr}`);
  return worked;
}

// ~1 s of CPU at the default 100 Hz is ~100 samples; a quarter of that
// says the last period is there, on a loaded machine too.
function assertLastPeriod(profileList, worked, where) {
  const n = samplesIn(profileList, 'lifeWorkBeforeExit');
  const expected = worked.cpu_s * 100;
  assert.ok(n >= expected * 0.25,
            `${where}: ${n} samples in lifeWorkBeforeExit, expected about ${expected.toFixed(0)}`);
}

// A server that accepts the upload and never answers.
function startSilentServer() {
  const sockets = new Set();
  let received = 0;
  const server = net.createServer((sock) => {
    sockets.add(sock);
    sock.on('data', (d) => { received += d.length; });
    sock.on('error', () => {});
    sock.on('close', () => sockets.delete(sock));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    url: `http://127.0.0.1:${server.address().port}`,
    received: () => received,
    close: () => new Promise((r) => {
      for (const s of sockets) s.destroy();
      server.close(r);
    }),
  })));
}

// A port nobody listens on: connections to it are refused at once.
function refusingAddress() {
  const server = net.createServer();
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    const { port } = server.address();
    server.close(() => resolve(`http://127.0.0.1:${port}`));
  }));
}

// How long the last upload held the end up: from the end of the work to the
// child's own exit handler (which runs after the package's).
async function endingDelay(how, settings) {
  const r = await runChild('ending', settings, { args: [how] });
  const worked = assertExitedByItself(r);
  const exit = r.events.find((e) => e.event === 'exit');
  assert.ok(exit, `no exit event\n${r.stderr}`);
  return { ms: exit.t - worked.t, stopped: r.events.find((e) => e.event === 'stopped'), r };
}

// Issue 28: a dead server held the exit up for the whole stopTimeout (stop(),
// process.exit()) or longer (a natural exit, held by the open request): the
// refused upload was retried with backoff while the process waited.
describe('life cycle: the end with a dead server', function () {
  this.timeout(120e3);

  for (const how of ['stop', 'exit', 'natural']) {
    it(`a refusing server delays the end by under 1 s (${how})`, async () => {
      const addr = await refusingAddress();
      const { ms, stopped, r } = await endingDelay(how, { appName: 'life-dead', serverAddress: addr,
                                                         stopTimeout: 5, ...LONG_PERIOD });
      assert.ok(ms < 1000, `the end took ${ms} ms after the work\n${r.stderr}`);
      if (stopped) assert.ok(stopped.stats.uploadsFailed >= 1, JSON.stringify(stopped.stats));
    });

    it(`a server that never answers delays the end by at most stopTimeout (${how})`, async () => {
      const server = await startSilentServer();
      try {
        const { ms, r } = await endingDelay(how, { appName: 'life-hang', serverAddress: server.url,
                                                   stopTimeout: 2, ...LONG_PERIOD });
        assert.ok(server.received() > 0, 'the last period was not even sent');
        // stopTimeout, plus the time to encode the period and leave
        assert.ok(ms < 2000 + 1000, `the end took ${ms} ms after the work\n${r.stderr}`);
      } finally {
        await server.close();
      }
    });
  }

  it('stats() after stop() has the last upload in uploadsOk', async () => {
    const server = await ingest.startIngestServer();
    try {
      const { stopped, r } = await endingDelay('stop', { appName: 'life-ok', serverAddress: server.url,
                                                         ...LONG_PERIOD });
      assert.ok(stopped, `no stopped event\n${r.stderr}`);
      assert.ok(stopped.stats.uploadsOk >= 1, JSON.stringify(stopped.stats));
      assert.strictEqual(stopped.stats.uploadsFailed, 0, JSON.stringify(stopped.stats));
    } finally {
      await server.close();
    }
  });
});

describe('life cycle: exit without stop()', function () {
  this.timeout(90e3);
  let tmp;

  beforeEach(() => { tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pn-life-exit-')); });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('ends by itself and writes its last period to the output folder', async () => {
    const r = await runChild('exit', { appName: 'life-exit', outputDir: tmp, ...LONG_PERIOD });
    const worked = assertExitedByItself(r);
    const files = profiles.decodeFolder(tmp);
    assert.ok(files.some((f) => profiles.isTimeProfile(f.profile)),
              `no time profile in ${tmp}: ${fs.readdirSync(tmp).join(', ') || 'empty'}`);
    assertLastPeriod(files.map((f) => f.profile), worked, tmp);
  });

  it('ends by itself and uploads its last period to the server', async () => {
    const server = await ingest.startIngestServer();
    try {
      const r = await runChild('exit', { appName: 'life-exit-upload', serverAddress: server.url,
                                         ...LONG_PERIOD });
      const worked = assertExitedByItself(r);
      const uploads = await decodeAll(server.kept);
      assert.ok(uploads.length >= 1, 'nothing was uploaded');
      assert.ok(uploads.every((u) => u.app === 'life-exit-upload'),
                `unexpected app names: ${uploads.map((u) => u.app).join(', ')}`);
      assertLastPeriod(uploads.flatMap((u) => u.profiles), worked, 'uploads');
    } finally {
      await server.close();
    }
  });

  it('ends by itself when the server never answers the last upload (stopTimeout)', async () => {
    const server = await startSilentServer();
    try {
      const r = await runChild('exit', { appName: 'life-exit-silent', serverAddress: server.url,
                                         stopTimeout: 2, ...LONG_PERIOD });
      assertExitedByItself(r);
      assert.ok(server.received() > 0, 'the last period was not even sent');
    } finally {
      await server.close();
    }
  });
});
