'use strict';
// Shared by the api-*.test.js files: pprof decoding with the independent `pprof-format`
// decoder, a loopback ingest server (both upload shapes: multipart parsed by undici's
// FormData, or the raw body with format=pprof), busy work.

const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');
const zlib = require('zlib');
const { Profile } = require('pprof-format');

function decodePprof(buf) {
  const raw = buf[0] === 0x1f && buf[1] === 0x8b ? zlib.gunzipSync(buf) : buf;
  const p = Profile.decode(raw);
  const str = (i) => p.stringTable.strings[Number(i)];
  const fn = new Map(p.function.map((f) => [Number(f.id), f]));
  const loc = new Map(p.location.map((l) => [Number(l.id), l]));
  const frame = (id) => {
    const l = loc.get(Number(id));
    const f = fn.get(Number(l.line[0].functionId));
    return { name: str(f.name), file: str(f.filename), line: Number(l.line[0].line) };
  };
  const samples = p.sample.map((s) => {
    const labels = {};
    for (const lb of s.label) labels[str(lb.key)] = str(lb.str);
    const frames = s.locationId.map(frame);
    return { frames, names: frames.map((f) => f.name), values: s.value.map(Number), labels };
  });
  return {
    profile: p,
    sampleTypes: p.sampleType.map((t) => `${str(t.type)}/${str(t.unit)}`),
    periodType: p.periodType ? `${str(p.periodType.type)}/${str(p.periodType.unit)}` : undefined,
    period: Number(p.period),
    samples,
  };
}

// Every profile the folder exporter wrote (<app>-<type>-<from>-<until>.pb.gz).
function decodeFolder(dir) {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).filter((f) => f.endsWith('.pb.gz')).sort().map((f) => ({
    file: f, ...decodePprof(fs.readFileSync(path.join(dir, f))),
  }));
}

// Samples of all profiles whose file name has `type` (e.g. "cpu"), with their count
// (the first value).
function samplesOf(profiles, type) {
  const out = [];
  for (const p of profiles) {
    if (type && !p.file.includes(`-${type}-`) && !p.sampleTypes.some((t) => t.startsWith(type))) continue;
    for (const s of p.samples) out.push(s);
  }
  return out;
}

// A sample predicate: the stack has the function `name` (frames are named
// "path:function:line", the anchor's way).
function inFunction(name) {
  return (s) => s.names.some((n) => n.includes(`:${name}:`));
}

function count(samples, pred) {
  let n = 0;
  for (const s of samples) if (pred(s)) n += s.values[0];
  return n;
}

function tmpdir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

// A Pyroscope ingest stand-in on 127.0.0.1: records each POST /ingest with its query,
// headers, body, shape, the profile's bytes and the decoded profile, read as the Pyroscope server does: with
// format=pprof the raw body is the profile (shape 'raw'), else the `profile` part of a
// multipart/form-data body (shape 'multipart'). waitFor(pred) resolves when pred(requests).
// hold(entry) -> true keeps that request unanswered (until close).
function ingestServer({ hold } = {}) {
  const requests = [];
  const waiters = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      const url = new URL(req.url, 'http://127.0.0.1');
      const entry = { path: url.pathname, query: Object.fromEntries(url.searchParams), headers: req.headers, body };
      const ctype = req.headers['content-type'] || '';
      try {
        if (entry.query.format === 'pprof') {
          entry.shape = 'raw';
          entry.profile = body;
          entry.pprof = decodePprof(body);
        } else if (ctype.startsWith('multipart/form-data')) {
          entry.shape = 'multipart';
          const form = await new Response(body, { headers: { 'content-type': ctype } }).formData();
          const part = form.get('profile');
          entry.filename = part && part.name;
          entry.profile = Buffer.from(await part.arrayBuffer());
          entry.pprof = decodePprof(entry.profile);
        } else {
          throw new Error(`neither format=pprof nor multipart (content-type '${ctype}')`);
        }
      } catch (e) {
        entry.error = e.message;
      }
      requests.push(entry);
      if (!(hold && hold(entry))) res.writeHead(200).end('ok');
      for (const w of waiters.splice(0)) w();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    resolve({
      url: `http://127.0.0.1:${server.address().port}`,
      requests,
      async waitFor(pred, deadlineMs = 30000) {
        const end = Date.now() + deadlineMs;
        while (!pred(requests)) {
          if (Date.now() > end) throw new Error(`ingest: condition not met; ${requests.length} requests`);
          await new Promise((r) => { waiters.push(r); setTimeout(r, 200).unref(); });
        }
      },
      close: () => new Promise((r) => {
        server.close(r);
        server.closeAllConnections();
      }),
    });
  }));
}

// Burns CPU in a function whose name the profile shows, for about `ms` of CPU.
function burn(ms) {
  const end = process.cpuUsage().user + ms * 1000;
  let x = 0;
  while (process.cpuUsage().user < end) {
    for (let i = 0; i < 20000; i++) x += Math.sqrt(i);
  }
  return x;
}

// lib/native.js (node-native's part) when this tree has it: tests that need it are skipped
// only while the file does not exist; an addon that exists but fails to load fails them.
function loadNative() {
  const file = path.join(__dirname, '..', 'lib', 'native.js');
  return fs.existsSync(file) ? require(file) : undefined;
}

module.exports = { loadNative, decodePprof, decodeFolder, samplesOf, count, inFunction, tmpdir, ingestServer, burn };
