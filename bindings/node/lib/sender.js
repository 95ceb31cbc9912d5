'use strict';
// Uploads through Node's own http/https (the addon's sender.c hands each
// request over from the core's exporter thread): libcurl and the libraries
// it pulls in stay out of the process. The core builds the request whole
// (an ingest upload is the gzip'ed pprof as the body, with format=pprof in
// the query); this only transports it. send(request, done) with request =
// {url, headers, user, password, caFile, caDir, body, timeoutMs,
// connectTimeoutMs}; done(status) for the server's answer, done(0, message)
// for a transport error, done(-1) to let libcurl send it: when a proxy is
// configured (libcurl reads http_proxy & co. as before) or certificates are
// trusted from a directory (SSL_CERT_DIR), which Node's TLS cannot take.
// exiting() settles the requests in flight before the exit handler blocks
// the JS thread: done(-2) (not sent again) for one that went out whole,
// done(-1) (libcurl sends it) for one that did not.
const fs = require('fs');

// Bytes of the reply kept for messages, and read at most (as on libcurl's path).
const REPLY_KEEP = 300;
const REPLY_MAX = 64 * 1024;
// TLS verification failures (OpenSSL's X509 codes as Node names them).
const CERT_ERRORS = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|ALTNAME/;
const PROXY_VARS = ['http_proxy', 'https_proxy', 'all_proxy', 'HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY'];

// One kept-alive connection per scheme, reused from one upload to the next
// (Node unrefs idle sockets: they never keep the process alive).
const agents = {};
function agentFor(mod, scheme) {
  if (!agents[scheme]) agents[scheme] = new mod.Agent({ keepAlive: true, maxSockets: 1 });
  return agents[scheme];
}

// The trusted certificates of a file, read once: the same bytes each time
// also keep the agent's connection key the same, so it is reused.
const caCache = new Map();
function certificates(file) {
  if (!caCache.has(file)) caCache.set(file, fs.readFileSync(file));
  return caCache.get(file);
}

// The requests sent and not yet answered: {request(), finish}.
const inFlight = new Set();

function proxied() {
  return PROXY_VARS.some((v) => process.env[v]);
}

function send(req, done) {
  let finished = false;
  let timer = null;
  let connectTimer = null;
  let current = null; // the request of the latest attempt
  const entry = { request: () => current, finish: null };
  const finish = (status, error, reply, permanent) => {
    if (finished) return;
    finished = true;
    inFlight.delete(entry);
    if (timer) clearTimeout(timer);
    if (connectTimer) clearTimeout(connectTimer);
    done(status, error || '', reply || '', !!permanent);
  };
  if (proxied() || (req.caDir && /^https:/i.test(req.url))) return finish(-1);
  let url;
  try {
    url = new URL(req.url);
  } catch (e) {
    return finish(0, `bad address: ${e.message}`);
  }
  const scheme = url.protocol === 'https:' ? 'https' : 'http';
  const mod = require(scheme);
  const opts = { method: 'POST', headers: req.headers, agent: agentFor(mod, scheme) };
  if (req.user) opts.auth = `${req.user}:${req.password || ''}`;
  else if (req.password) opts.auth = `:${req.password}`;
  if (req.caFile && scheme === 'https') {
    try {
      opts.ca = certificates(req.caFile);
    } catch (e) {
      return finish(0, `cannot read the certificates in ${req.caFile}: ${e.message}`);
    }
  }
  opts.headers = Object.assign({}, req.headers, { 'Content-Length': String(req.body.length) });
  entry.finish = finish;
  inFlight.add(entry);
  timer = setTimeout(() => current && current.destroy(new Error(`no answer within ${req.timeoutMs} ms`)),
                     req.timeoutMs);
  timer.unref();
  // A kept-alive connection the server closed meanwhile fails at once with
  // ECONNRESET: sent again once on a new one (libcurl does the same).
  const attempt = (again) => {
    let r;
    try {
      r = current = mod.request(url, opts, (res) => readReply(res, finish));
    } catch (e) {
      return finish(0, e.message);
    }
    r.on('error', (e) => {
      if (!again && r.reusedSocket && e.code === 'ECONNRESET' && !finished) return attempt(true);
      // a refused certificate stays refused: not retried (as on libcurl's path)
      const cert = CERT_ERRORS.test(e.code || '');
      finish(0, (e.code ? `${e.message} (${e.code})` : e.message) +
        (cert ? ' (the certificates trusted come from SSL_CERT_FILE when set, else Node\'s own)' : ''), '', cert);
    });
    r.on('socket', (sock) => {
      if (!sock.connecting) return;
      if (connectTimer) clearTimeout(connectTimer);
      connectTimer = setTimeout(
        () => r.destroy(new Error(`could not connect within ${req.connectTimeoutMs} ms`)), req.connectTimeoutMs);
      connectTimer.unref();
      sock.once('connect', () => clearTimeout(connectTimer));
    });
    r.end(req.body);
  };
  attempt(false);
}

// The process exits (the exit handler is about to block the JS thread):
// no answer will be read any more. A request whose body went out whole to
// the kernel (writableFinished) is not sent again: the server most likely
// ingests it, and a copy would count twice. One that did not (still
// connecting, or partly written: the server cannot ingest a cut body) is
// sent by libcurl instead. Synchronous; main thread.
function exiting() {
  for (const entry of [...inFlight]) {
    const r = entry.request();
    if (r && r.socket && r.writableFinished) {
      entry.finish(-2, 'sent whole, but the process exits before the answer');
    } else {
      entry.finish(-1);
    }
  }
}

// The agent stopped (its exporter thread is gone, and with it whoever
// waited for these answers): a request still open to a server that never
// answers would keep the process alive until its own timeout (10 s) after
// stop() resolved. Main thread.
function abandon() {
  for (const entry of [...inFlight]) {
    const r = entry.request();
    entry.finish(0, 'abandoned: the profiler stopped');
    if (r) r.destroy();
  }
}

// The status and the reply's first bytes, reading at most REPLY_MAX.
function readReply(res, finish) {
  const kept = [];
  let keptLen = 0;
  let total = 0;
  const text = () => Buffer.concat(kept).toString('latin1');
  res.on('data', (chunk) => {
    total += chunk.length;
    if (keptLen < REPLY_KEEP) {
      kept.push(chunk.subarray(0, REPLY_KEEP - keptLen));
      keptLen += Math.min(chunk.length, REPLY_KEEP - keptLen);
    }
    // a huge answer: the status decided, the rest is not worth waiting for
    if (total > REPLY_MAX) {
      finish(res.statusCode, '', text());
      res.destroy();
    }
  });
  res.on('end', () => finish(res.statusCode, '', text()));
  res.on('error', (e) => finish(0, e.message));
  res.on('close', () => finish(0, 'the connection closed before the reply ended'));
}

module.exports = { send, exiting, abandon };
