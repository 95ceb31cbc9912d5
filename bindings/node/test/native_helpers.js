'use strict';
// Helpers of the native-*.test.js files: temporary folders, decoding the
// folder exporter's .pb.gz files with pprof-format (an independent decoder),
// and CPU burners with distinct names.
const fs = require('fs');
const os = require('os');
const path = require('path');
const zlib = require('zlib');
const { Profile } = require('pprof-format');

function tmpdir(name) {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'pn-node-' + name + '-'));
}

function rmdir(dir) {
  fs.rmSync(dir, { recursive: true, force: true });
}

// Every profile of `type` ('cpu', 'wall', 'heap') in dir, decoded.
function profiles(dir, type) {
  return fs.readdirSync(dir)
    .filter((f) => f.endsWith('.pb.gz') && f.includes('-' + type + '-'))
    .map((f) => Profile.decode(zlib.gunzipSync(fs.readFileSync(path.join(dir, f)))));
}

// Samples as {stack: [function names, leaf first], labels: {k: v}, values:
// [numbers], count: how many V8 samples (the "samples" value; pprof sums
// samples of one stack and label set into one)}.
function samples(profs) {
  const out = [];
  for (const p of profs) {
    const str = (i) => p.stringTable.strings[Number(i)];
    const fn = new Map(p.function.map((f) => [Number(f.id), str(f.name)]));
    const loc = new Map(p.location.map((l) => [Number(l.id), l.line.map((ln) => fn.get(Number(ln.functionId)))]));
    for (const s of p.sample) {
      const stack = [];
      for (const id of s.locationId) stack.push(...loc.get(Number(id)));
      const labels = {};
      for (const l of s.label) labels[str(l.key)] = str(l.str);
      const types = p.sampleType.map((t) => str(t.type));
      const values = s.value.map(Number);
      const ci = types.indexOf('samples');
      out.push({ stack, labels, values, types, count: ci >= 0 ? values[ci] : 1 });
    }
  }
  return out;
}

// Sum of value `i` over samples whose stack has function `name`.
function total(list, i, pred) {
  let t = 0;
  for (const s of list) if (!pred || pred(s)) t += s.values[i];
  return t;
}

// Number of V8 samples in list (optionally those pred accepts).
function count(list, pred) {
  let n = 0;
  for (const s of list) if (!pred || pred(s)) n += s.count;
  return n;
}

function has(s, name) {
  return s.stack.includes(name);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Burn `ms` of CPU time (process CPU, so a loaded machine stretches the wall
// time, not the work): callers wrap it in named functions, one frame each.
function spin(ms) {
  const start = process.cpuUsage();
  const want = ms * 1000;
  let x = 0;
  for (;;) {
    for (let i = 0; i < 2000; i++) x += Math.sqrt(i + x);
    const u = process.cpuUsage(start);
    if (u.user + u.system >= want) return x;
  }
}

// Burn CPU until V8 has taken `n` more samples (SIGPROF brackets, counted
// as they happen; a loaded machine may take a while), at most 30 s.
function spinUntilSampled(native, n) {
  const start = native.stats().join.brackets;
  const deadline = Date.now() + 30000;
  do spin(20); while (native.stats().join.brackets - start < n && Date.now() < deadline);
}

module.exports = { tmpdir, rmdir, profiles, samples, total, count, has, sleep, spin, spinUntilSampled };
