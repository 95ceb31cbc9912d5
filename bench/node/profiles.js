'use strict';
// Decoding pprof profiles with pprof-format (an independent decoder, not
// ours): bytes (gzip'ed or not), the `.pb.gz` files of an output folder,
// and the samples of a time profile with their labels. Also used by the
// binding's life-cycle tests (bindings/node/test/life-*.test.js); from there
// pprof-format resolves to the repository's own dev dependency.

const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');
const { Profile } = require('pprof-format');

function decodePprof(bytes) {
  const buf = Buffer.from(bytes);
  const raw = buf[0] === 0x1f && buf[1] === 0x8b ? zlib.gunzipSync(buf) : buf;
  return Profile.decode(raw);
}

function decodeFolder(dir) {
  return fs.readdirSync(dir).filter((n) => n.endsWith('.pb.gz') || n.endsWith('.pb'))
    .sort().map((n) => ({ file: n, profile: decodePprof(fs.readFileSync(path.join(dir, n))) }));
}

function sampleTypes(p) {
  const s = p.stringTable.strings;
  return p.sampleType.map((vt) => [s[Number(vt.type)], s[Number(vt.unit)]]);
}

// A time profile (cpu or wall), as opposed to a heap one.
function isTimeProfile(p) {
  return sampleTypes(p).some(([t]) => t === 'cpu' || t === 'wall');
}

// Each sample of a time profile as { frames: [function names, leaf first],
// labels: {key: string value}, count: samples it stands for }. The count is
// the `samples` value when there is one, else the time value / period.
function timeSamples(p) {
  const s = p.stringTable.strings;
  const types = sampleTypes(p);
  let idx = types.findIndex(([t]) => t === 'samples');
  let scale = 1;
  if (idx < 0) {
    idx = types.findIndex(([t]) => t === 'cpu' || t === 'wall');
    scale = Number(p.period) || 1;
  }
  const fnName = new Map(p.function.map((f) => [Number(f.id), s[Number(f.name)]]));
  const locFrames = new Map(p.location.map((l) => [Number(l.id),
    l.line.map((ln) => fnName.get(Number(ln.functionId)) || '?')]));
  return p.sample.map((smp) => {
    const labels = {};
    for (const l of smp.label) if (Number(l.str)) labels[s[Number(l.key)]] = s[Number(l.str)];
    return {
      frames: smp.locationId.flatMap((id) => locFrames.get(Number(id)) || []),
      labels,
      count: Number(smp.value[idx]) / scale,
    };
  });
}

// The bare function name of a frame: the anchor names functions
// `file:name:line`, we name them `name`.
function frameFunction(frame) {
  const m = /(?:^|:)([\w$]+)(?::\d+)?$/.exec(frame);
  return m ? m[1] : frame;
}

module.exports = { frameFunction, decodePprof, decodeFolder, sampleTypes, isTimeProfile,
                   timeSamples };
