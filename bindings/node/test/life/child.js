'use strict';
// The profiled process of the life-cycle tests (../life-*.test.js): one
// scenario per run, settings as JSON in argv[3], progress as `LIFE {json}`
// lines on stdout. It uses the package as an application does.
//
//   node child.js exit  '{"appName":..., "outputDir":...}'
//       start() and never stop(): burns CPU, then simply returns. The test
//       expects the process to end by itself with the last period written.
//   node child.js rate  '{"appName":..., "serverAddress":..., ...}'
//       start(), burn CPU, await stop(): the test checks the sampleRate the
//       uploads carry against the samples they hold.
//   node child.js soak  '{"appName":..., "serverAddress":..., ...}' SECONDS
//       a labelled service loop at ~30 % of a core for SECONDS, reporting its
//       RSS twice a second, then await stop().
//   node child.js ending '{"appName":..., "serverAddress":..., ...}' HOW
//       start(), burn CPU, then end by HOW: `stop` (await stop(), report
//       stats()), `exit` (process.exit(0)) or `natural` (just return). Its
//       own exit handler (after the package's) reports when it ran, so the
//       test sees how long the last upload held the exit up.

const fs = require('node:fs');
const path = require('node:path');

// PN_LIFE_PACKAGE runs the scenarios against another package with the same
// API (e.g. bench/node's @pyroscope/nodejs, to watch the tests catch it).
const pkg = require(process.env.PN_LIFE_PACKAGE || path.resolve(__dirname, '..', '..', '..', '..'));
const Pyroscope = pkg.default || pkg;

const [mode, settingsJson, secondsArg] = process.argv.slice(2);
const settings = JSON.parse(settingsJson || '{}');

function emit(event, fields = {}) {
  process.stdout.write('LIFE ' + JSON.stringify({ event, ...fields }) + '\n');
}

function rssKiB() {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return Number(m[1]);
}

function cpuSeconds() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

// Busy work the optimiser keeps; each caller has its own name so the test
// finds its samples by function.
function spin(ms) {
  const end = performance.now() + ms;
  let h = 7;
  while (performance.now() < end) {
    for (let i = 0; i < 1000; i++) h = Math.imul(h ^ i, 0x9e3779b1) + (h >>> 13);
  }
  return h;
}

function lifeWorkBeforeExit(ms) { return spin(ms); }
function lifeWorkRate(ms) { return spin(ms); }
function lifeSoakHandler(ms) { return spin(ms); }

const tick = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function exitWithoutStop() {
  Pyroscope.init(settings);
  Pyroscope.start();
  const cpu0 = cpuSeconds();
  // Chunks with awaits between them, as a script doing some I/O would.
  for (let i = 0; i < 20; i++) {
    lifeWorkBeforeExit(50);
    await tick();
  }
  emit('worked', { cpu_s: cpuSeconds() - cpu0 });
  // No stop(), no process.exit(): returning here must be enough.
}

async function rate() {
  Pyroscope.init(settings);
  Pyroscope.start();
  const cpu0 = cpuSeconds();
  const t0 = performance.now();
  for (let i = 0; i < 30; i++) {
    lifeWorkRate(50);
    await tick();
  }
  const worked = { cpu_s: cpuSeconds() - cpu0, wall_s: (performance.now() - t0) / 1000 };
  await Pyroscope.stop();
  emit('worked', worked);
}

// Requests of 3 ms CPU split by an await, with one of 20 label values each,
// then a 7 ms pause: ~30 % of a core, labels and async hops all the time.
async function soak(seconds) {
  Pyroscope.init(settings);
  Pyroscope.start();
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  let n = 0;
  let nextReport = t0;
  while (performance.now() < end) {
    const route = `/r${n++ % 20}`;
    await new Promise((resolve, reject) => {
      Pyroscope.wrapWithLabels({ route }, () => {
        (async () => {
          lifeSoakHandler(1.5);
          await tick();
          lifeSoakHandler(1.5);
        })().then(resolve, reject);
      });
    });
    await sleep(7);
    if (performance.now() >= nextReport) {
      emit('rss', { t: (performance.now() - t0) / 1000, rss_kib: rssKiB() });
      nextReport += 500;
    }
  }
  await Pyroscope.stop();
  emit('done', { requests: n });
}

async function ending(how) {
  Pyroscope.init(settings);
  Pyroscope.start();
  for (let i = 0; i < 6; i++) {
    lifeWorkBeforeExit(50);
    await tick();
  }
  process.on('exit', () => emit('exit', { t: Date.now() }));
  emit('worked', { t: Date.now() });
  if (how === 'stop') {
    await Pyroscope.stop();
    emit('stopped', { t: Date.now(), stats: Pyroscope.stats() });
  } else if (how === 'exit') {
    process.exit(0);
  }
}

const scenarios = { exit: exitWithoutStop, rate, soak: () => soak(Number(secondsArg || 60)),
                    ending: () => ending(secondsArg) };
if (!scenarios[mode]) {
  process.stderr.write(`child.js: unknown scenario '${mode}'\n`);
  process.exitCode = 2;
} else {
  scenarios[mode]().catch((err) => {
    process.stderr.write(`child.js ${mode}: ${err && err.stack ? err.stack : err}\n`);
    process.exitCode = 1;
  });
}
