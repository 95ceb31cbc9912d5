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

// Named burners: each shows as its own frame.
function spin(ms) {
  const end = process.hrtime.bigint() + BigInt(Math.round(ms * 1e6));
  let x = 0;
  while (process.hrtime.bigint() < end) for (let i = 0; i < 1000; i++) x += Math.sqrt(i + x);
  return x;
}

module.exports = { tmpdir, rmdir, profiles, samples, total, count, has, sleep, spin };
