'use strict';
// Uploads through Node's own http (lib/sender.js, src/sender.c) instead of
// libcurl: the same requests arrive (query, headers, decodable profile) but
// in the anchor's shape (the raw gzip'ed pprof body with format=pprof; libcurl
// sends multipart, without format), libcurl is never mapped in a normal run,
// failures are counted as before, the exit handler's last upload still
// arrives (libcurl then sends it), an upload in flight at process.exit() is
// not sent twice, and a blocked event loop hands the upload to libcurl.
const assert = require('assert');
const { spawn, execFileSync } = require('child_process');
const fs = require('fs');
const https = require('https');
const http = require('http');
const net = require('net');
const path = require('path');
const readline = require('readline');

const { ingestServer, burn, tmpdir } = require('./api-helpers');
const api = require('../lib');
const native = require('../lib/native');

const CHILD = path.join(__dirname, 'fixtures', 'upload-child.js');

// -> {code, events, stderr}; started(child) runs once it is spawned.
function runChild(mode, options, extraEnv = {}, started = null) {
  const env = Object.assign({}, process.env);
  for (const k of Object.keys(env)) if (/^(PYROSCOPE_|OTEL_|SSL_CERT_)|_proxy$/i.test(k)) delete env[k];
  Object.assign(env, extraEnv);
  const child = spawn(process.execPath, [CHILD, mode, JSON.stringify(options)],
                      { env, stdio: [started ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
  if (started) started(child);
  const events = {};
  let stderr = '';
  child.stderr.on('data', (c) => { stderr = (stderr + c).slice(-8000); });
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    if (line.startsWith('UPLOAD ')) {
      const ev = JSON.parse(line.slice(7));
      events[ev.event] = ev;
    }
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60000);
  return new Promise((resolve) => child.on('close', (code) => {
    clearTimeout(timer);
    resolve({ code, events, stderr });
  }));
}

const OPTIONS = (url, app) => ({
  appName: app, serverAddress: url, authToken: 'tok-1', tenantID: 'tenant-1',
  tags: { env: 'test' }, flushIntervalMs: 600000,
});

// What a request carries besides its time range, body and shape: equal on both paths.
function shape(r) {
  const h = r.headers;
  return {
    path: r.path,
    query: Object.keys(r.query).filter((k) => k !== 'format').sort().join(','),
    name: r.query.name, sampleRate: r.query.sampleRate, spyName: r.query.spyName,
    userAgent: h['user-agent'], authorization: h.authorization, tenant: h['x-scope-orgid'],
  };
}

// The shape each path sends: node's http the raw body with format=pprof
// (as @pyroscope/nodejs), libcurl a multipart `profile` part without format.
function assertNodeShape(r) {
  assert.strictEqual(r.shape, 'raw');
  assert.strictEqual(r.query.format, 'pprof');
  assert.strictEqual(r.headers['content-type'], 'application/octet-stream');
  assert.strictEqual(r.headers['content-encoding'], undefined);
}
function assertCurlShape(r) {
  assert.strictEqual(r.shape, 'multipart');
  assert.ok(!('format' in r.query), 'a multipart body must not say format=pprof');
  assert.match(r.headers['content-type'], /^multipart\/form-data; boundary=/);
  assert.strictEqual(r.filename, 'profile.pprof');
}

describe('uploads through node:http', function () {
  this.timeout(90000);

  it('sends what libcurl sends, decodable, and never maps libcurl', async () => {
    const server = await ingestServer();
    const runs = {};
    try {
      for (const mode of ['node', 'libcurl']) {
        const before = server.requests.length;
        const r = await runChild(mode, OPTIONS(server.url, `client.${mode}`));
        assert.strictEqual(r.code, 0, r.stderr);
        assert.ok(r.events.flushed, `no flush: ${r.stderr}`);
        assert.strictEqual(r.events.flushed.flushed, true, `flush failed: ${r.stderr}`);
        assert.ok(r.events.flushed.stats.uploadsOk >= 1, JSON.stringify(r.events.flushed.stats));
        runs[mode] = { child: r, requests: server.requests.slice(before) };
      }
    } finally {
      await server.close();
    }
    const viaNode = runs.node.requests, viaCurl = runs.libcurl.requests;
    assert.ok(viaNode.length >= 2 && viaCurl.length >= 2, `${viaNode.length} / ${viaCurl.length} requests`);
    for (const r of viaNode.concat(viaCurl)) assert.ok(r.pprof, `not decodable: ${r.error}`);
    assert.ok(viaNode.some((r) => r.pprof.samples.length > 0), 'no samples uploaded');
    const norm = (r, app) => Object.assign(shape(r), { name: r.query.name.replace(app, 'APP') });
    assert.deepStrictEqual(norm(viaNode[0], 'client.node'), norm(viaCurl[0], 'client.libcurl'));
    viaNode.forEach(assertNodeShape);
    viaCurl.forEach(assertCurlShape);
    assert.strictEqual(viaNode[0].headers['user-agent'], 'pyroscope-native');
    // the user's tag and the anchor's series tags (api-export checks their values)
    assert.match(viaNode[0].query.name, /^client\.node\{env=test,otel\.scope\.name=[^}]*process\.runtime\.version=[^,}]+\}$/);
    // libcurl stays out of the process: at the flush and after stop()
    assert.strictEqual(runs.node.child.events.flushed.curl, false);
    assert.strictEqual(runs.node.child.events.stopped.curl, false);
    // (and the check can fail: the libcurl run has it)
    assert.strictEqual(runs.libcurl.child.events.flushed.curl, true);
  });

  async function exitRun(mode, app) {
    const server = await ingestServer();
    let r;
    try {
      r = await runChild(mode, OPTIONS(server.url, app));
      await server.waitFor((reqs) => reqs.some((q) => q.pprof && q.pprof.samples.length > 0), 10000)
        .catch(() => {});
    } finally {
      await server.close();
    }
    assert.strictEqual(r.code, 0, r.stderr);
    assert.strictEqual(r.events.worked.curl, false, 'libcurl was mapped before the exit');
    assert.ok(r.events.exit, `no exit event\n${r.stderr}`);
    const reqs = server.requests.filter((q) => q.pprof && q.query.name.startsWith(app));
    assert.ok(reqs.some((q) => q.pprof.samples.length > 0),
              `the last period did not arrive: ${server.requests.length} requests\n${r.stderr}`);
    return r;
  }

  it('exit without stop(): the last period arrives through node:http (beforeExit)', async () => {
    const r = await exitRun('return', 'client.return');
    assert.strictEqual(r.events.exit.curl, false, 'libcurl was loaded for the last period');
  });

  it('process.exit() without stop(): the exit handler sends the last period through libcurl', async () => {
    const r = await exitRun('exit', 'client.exit');
    assert.strictEqual(r.events.exit.curl, true, 'libcurl did not send it: who did?');
  });

  it('process.exit() while an upload is in flight: not sent again, counted unconfirmed', async () => {
    // the first request arrives whole and gets no answer; the child exits then
    let first = null;
    const server = await ingestServer({ hold: (q) => (first ? false : (first = q, true)) });
    let r;
    try {
      r = await runChild('inflight-exit', OPTIONS(server.url, 'client.inflight'), {}, (child) => {
        server.waitFor((reqs) => reqs.length >= 1, 30000)
          .then(() => child.stdin.end('exit\n'), () => child.kill('SIGKILL'));
      });
    } finally {
      await server.close();
    }
    assert.strictEqual(r.code, 0, r.stderr);
    assert.ok(r.events.exit, `no exit event\n${r.stderr}`);
    const reqs = server.requests;
    for (const q of reqs) assert.ok(q.pprof, `not decodable: ${q.error}`);
    assertNodeShape(first);
    // the rest (the flush's other profiles, the last period) went through libcurl
    assert.ok(reqs.length >= 2, `${reqs.length} requests\n${r.stderr}`);
    reqs.slice(1).forEach(assertCurlShape);
    assert.strictEqual(r.events.exit.curl, true);
    // at most once: no profile arrived twice (before, libcurl sent the held one again)
    const keys = reqs.map((q) => q.profile.toString('base64'));
    assert.strictEqual(new Set(keys).size, keys.length,
      `a profile arrived twice: ${reqs.map((q) => `${q.shape} ${q.query.from}..${q.query.until}`).join(', ')}`);
    // and the counts say so: unconfirmed, not ok, not failed, not retried
    const st = r.events.exit.stats;
    assert.ok(st, 'no exit stats');
    assert.strictEqual(st.uploadsUnconfirmed, 1, JSON.stringify(st));
    assert.strictEqual(st.uploadsOk, reqs.length - 1, JSON.stringify(st));
    assert.strictEqual(st.uploadsFailed, 0, JSON.stringify(st));
    assert.strictEqual(st.retries, 0, JSON.stringify(st));
    assert.ok(r.events.exit.sender.declined >= 1, JSON.stringify(r.events.exit.sender));
  });

  it('a blocked event loop: libcurl sends the upload meanwhile, and the stats say so', async () => {
    const server = await ingestServer();
    let r;
    try {
      r = await runChild('busy', OPTIONS(server.url, 'client.busy'));
    } finally {
      await server.close();
    }
    assert.strictEqual(r.code, 0, r.stderr);
    assert.ok(r.events.busy, `no busy event\n${r.stderr}`);
    const { during } = r.events.busy;
    // counted while the JS thread never yielded: libcurl sent it
    assert.ok(during.uploadsOk >= 1, `no upload while the loop was blocked: ${JSON.stringify(during)}`);
    assert.ok(during.sender.declined >= 1, JSON.stringify(during.sender));
    assert.strictEqual(r.events.busy.curl, true);
    assert.strictEqual(r.events.flushed.flushed, true, r.stderr);
    const reqs = server.requests.filter((q) => q.query.name && q.query.name.startsWith('client.busy'));
    for (const q of reqs) assert.ok(q.pprof, `not decodable: ${q.error}`);
    assert.ok(reqs.some((q) => q.shape === 'multipart'), 'no upload in libcurl\'s shape');
    reqs.filter((q) => q.shape === 'multipart').forEach(assertCurlShape);
    reqs.filter((q) => q.shape === 'raw').forEach(assertNodeShape);
  });

  it('with http_proxy set, libcurl sends through the proxy as before', async () => {
    const proxy = await ingestServer(); // takes the proxied request (absolute-form target)
    let r;
    try {
      r = await runChild('node', OPTIONS('http://pyroscope.invalid:4040', 'client.proxy'),
                         { http_proxy: proxy.url });
    } finally {
      await proxy.close();
    }
    assert.strictEqual(r.code, 0, r.stderr);
    assert.strictEqual(r.events.flushed.flushed, true, r.stderr);
    assert.strictEqual(r.events.flushed.curl, true);
    const reqs = proxy.requests.filter((q) => q.pprof && q.query.name.startsWith('client.proxy'));
    assert.ok(reqs.length >= 1, `${proxy.requests.length} requests at the proxy`);
    assert.strictEqual(reqs[0].path, '/ingest');
  });

  // A self-signed certificate for 127.0.0.1 (openssl CLI), and an https
  // server that answers 200 and counts the uploads it got (either shape).
  async function tlsServer() {
    const dir = tmpdir('pn-tls-');
    const key = path.join(dir, 'key.pem'), cert = path.join(dir, 'cert.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert,
      '-days', '2', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    let uploads = 0;
    const server = https.createServer({ key: fs.readFileSync(key), cert: fs.readFileSync(cert) }, (req, res) => {
      req.resume();
      req.on('end', () => {
        if (/[?&]format=pprof(&|$)/.test(req.url) || /^multipart\/form-data/.test(req.headers['content-type'] || '')) uploads++;
        res.writeHead(200).end('ok');
      });
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    return {
      url: `https://127.0.0.1:${server.address().port}`, cert, uploads: () => uploads,
      close: () => new Promise((r) => { server.close(r); server.closeAllConnections(); }),
    };
  }

  it('https: trusts SSL_CERT_FILE as libcurl did, refuses an unknown certificate; SSL_CERT_DIR: libcurl', async () => {
    const server = await tlsServer();
    let trusted, untrusted, withDir;
    try {
      trusted = await runChild('node', OPTIONS(server.url, 'client.tls'), { SSL_CERT_FILE: server.cert });
      untrusted = await runChild('node', Object.assign(OPTIONS(server.url, 'client.tls2'), { stopTimeout: 1 }));
      // Node's TLS cannot take a directory of certificates: libcurl sends it
      withDir = await runChild('node', OPTIONS(server.url, 'client.tls3'),
                               { SSL_CERT_FILE: server.cert, SSL_CERT_DIR: path.dirname(server.cert) });
    } finally {
      await server.close();
    }
    for (const r of [trusted, untrusted, withDir]) assert.strictEqual(r.code, 0, r.stderr);
    assert.strictEqual(trusted.events.flushed.flushed, true, trusted.stderr);
    assert.strictEqual(trusted.events.flushed.curl, false);
    assert.strictEqual(untrusted.events.flushed.flushed, false, 'an unknown certificate was accepted');
    assert.match(untrusted.stderr, /self-signed|certificate/i);
    assert.strictEqual(untrusted.events.flushed.curl, false);
    assert.strictEqual(untrusted.events.flushed.stats.retries, 0, 'a refused certificate was retried');
    assert.strictEqual(withDir.events.flushed.flushed, true, withDir.stderr);
    assert.strictEqual(withDir.events.flushed.curl, true);
    assert.ok(server.uploads() >= 4, `${server.uploads()} uploads arrived over TLS`);
  });

  describe('failures, counted as on the libcurl path', () => {
    let logs;
    beforeEach(() => {
      logs = [];
      const keep = (...a) => logs.push(a.join(' '));
      api.setLogger({ debug() {}, info() {}, warn: keep, error: keep });
    });
    afterEach(async () => {
      await api.stop();
      api.setLogger(undefined);
    });

    // A server answering every request with `status` and `body`.
    function answering(status, body) {
      let hits = 0;
      const server = http.createServer((req, res) => {
        req.resume();
        req.on('end', () => { hits++; res.writeHead(status).end(body); });
      });
      return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
        url: `http://127.0.0.1:${server.address().port}`,
        hits: () => hits,
        close: () => new Promise((r) => {
          server.close(r);
          server.closeAllConnections();
        }),
      })));
    }

    async function uploadOnce(url) {
      api.init({ appName: 'client.fail', serverAddress: url, flushIntervalMs: 600000, stopTimeout: 1 });
      api.start();
      burn(100);
      const ok = await api.flush(30);
      const stats = native.stats();
      await api.stop();
      return { ok, stats };
    }

    // Log lines reach the logger through the event loop, after the flush
    // that caused them may have returned: wait for one (10 s at most).
    async function waitLog(re) {
      for (let i = 0; i < 200 && !logs.some((l) => re.test(l)); i++) {
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.ok(logs.some((l) => re.test(l)), `no log line matches ${re}:\n${logs.join('\n')}`);
    }

    it('HTTP 500: retried, then failed, with the reply in the message', async () => {
      const server = await answering(500, 'boom-500');
      try {
        const { ok, stats } = await uploadOnce(server.url);
        assert.strictEqual(ok, false);
        assert.ok(stats.retries >= 1, JSON.stringify(stats));
        assert.ok(stats.uploadsFailed >= 1, JSON.stringify(stats));
        assert.ok(server.hits() >= 2, `${server.hits()} requests`);
      } finally {
        await server.close();
      }
      await waitLog(/HTTP 500: boom-500/);
    });

    it('HTTP 400: failed without retries', async () => {
      const server = await answering(400, 'bad-request-400');
      try {
        const { ok, stats } = await uploadOnce(server.url);
        assert.strictEqual(ok, false);
        assert.strictEqual(stats.retries, 0, JSON.stringify(stats));
        assert.ok(stats.uploadsFailed >= 1, JSON.stringify(stats));
      } finally {
        await server.close();
      }
      await waitLog(/HTTP 400: bad-request-400/);
    });

    it('an unreachable server: retried, then failed, naming the error', async () => {
      // a port that was just free: nothing listens on it
      const port = await new Promise((resolve) => {
        const s = net.createServer().listen(0, '127.0.0.1', () => {
          const p = s.address().port;
          s.close(() => resolve(p));
        });
      });
      const { ok, stats } = await uploadOnce(`http://127.0.0.1:${port}`);
      assert.strictEqual(ok, false);
      assert.ok(stats.retries >= 1, JSON.stringify(stats));
      assert.ok(stats.uploadsFailed >= 1, JSON.stringify(stats));
      await waitLog(/ECONNREFUSED/);
    });
  });
});
