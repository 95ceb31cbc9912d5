'use strict';
// Helpers of the life-cycle tests: run child.js and collect its events; the
// loopback ingest server and the pprof decoding are the benchmark's own
// (bench/node), which resolve pprof-format from the repository's packages.

const { spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');

const ROOT = path.resolve(__dirname, '..', '..', '..', '..');
const ingest = require(path.join(ROOT, 'bench', 'node', 'ingest.js'));
const profiles = require(path.join(ROOT, 'bench', 'node', 'profiles.js'));

// The child sees none of the caller's profiler settings.
function cleanEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('PYROSCOPE_') && !k.startsWith('OTEL_')) env[k] = v;
  }
  return env;
}

// Runs one scenario; resolves (never rejects) with { code, signal, timedOut,
// events: [{event, ...}], stderr } once the process ended or was killed at
// the deadline (a generous one: it only catches a process that never ends).
function runChild(mode, settings, { args = [], deadlineMs = 60e3, onEvent } = {}) {
  const child = spawn(process.execPath,
                      [path.join(__dirname, 'child.js'), mode, JSON.stringify(settings), ...args],
                      { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  const events = [];
  let stderr = '';
  let timedOut = false;
  child.stderr.on('data', (c) => { stderr = (stderr + c).slice(-8000); });
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    if (!line.startsWith('LIFE ')) return;
    const ev = JSON.parse(line.slice(5));
    events.push(ev);
    if (onEvent) onEvent(ev);
  });
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, deadlineMs);
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, timedOut, events, stderr });
    });
  });
}

// Samples (counted in sampling periods) of time profiles whose stack holds
// function `fn`.
function samplesIn(profileList, fn) {
  let n = 0;
  for (const p of profileList) {
    if (!profiles.isTimeProfile(p)) continue;
    for (const s of profiles.timeSamples(p)) {
      if (s.frames.some((f) => profiles.frameFunction(f) === fn)) n += s.count;
    }
  }
  return n;
}

async function decodeAll(kept) {
  const out = [];
  for (const req of kept) out.push(await ingest.decodeUpload(req));
  return out;
}

module.exports = { ROOT, ingest, profiles, runChild, samplesIn, decodeAll };
