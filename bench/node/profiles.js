'use strict';
// Decoding what the profilers exported, with pprof-format (an independent
// pprof decoder): uploads captured by the loopback ingest server (the
// anchor's raw gzip'ed pprof body, our multipart form with a `profile`
// file) and `.pb.gz` files of an output folder.

const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');
const { Profile } = require('pprof-format');

function decodePprof(bytes) {
  const buf = Buffer.from(bytes);
  const raw = buf[0] === 0x1f && buf[1] === 0x8b ? zlib.gunzipSync(buf) : buf;
  return Profile.decode(raw);
}

// One captured request -> { app, query, profiles: [Profile] }. Multipart
// bodies are parsed by undici's Response.formData(), the fetch API's own.
async function decodeUpload({ url, headers, body }) {
  const u = new URL(url, 'http://loopback');
  const app = (u.searchParams.get('name') || '').split('{')[0];
  const ctype = headers['content-type'] || '';
  let parts = [body];
  if (ctype.startsWith('multipart/form-data')) {
    const form = await new Response(body, { headers: { 'content-type': ctype } }).formData();
    parts = [];
    for (const [, value] of form) {
      if (typeof value !== 'string') parts.push(Buffer.from(await value.arrayBuffer()));
    }
  }
  return { app, query: Object.fromEntries(u.searchParams), profiles: parts.map(decodePprof) };
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

module.exports = { decodePprof, decodeUpload, decodeFolder, sampleTypes, isTimeProfile,
                   timeSamples };
