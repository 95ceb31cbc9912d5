'use strict';
// Node benchmark of pyroscope-native against @pyroscope/nodejs 0.6.4 (the
// anchor), side by side in one run.
//
//   node bench/node/run.js [--quick] [--rounds N] [--variants none,v8floor,native,anchor]
//
// (Not in the default set: native-libcurl is ours uploading through libcurl
// instead of Node's http, as before; native-wall is ours with oncpu: false, wall-clock
// time as the anchor samples; v8floor only runs V8's CPU and heap sampling
// profilers through node:inspector, one profile for the window, nothing
// processed -- the floor any V8-profiler-based design pays; and
// NAME=native@DIR, ours from another checkout DIR built there, for an A/B of
// two builds in one run.) `make bench-node` installs bench/node's own
// packages (npm ci) and runs it. The window is a fixed amount of work (5000
// requests, ~10 s; --quick: 600).
// Every round runs the same service workload (workload.js) once per variant
// -- no profiler, this project, the anchor -- in a fresh process each, the
// order rotating from round to round (A B C, B C A, ...). Reported are the
// medians over all rounds:
//
// The window starts after a warm-up with the profiler running, a flush
// interval and a second long (--warm-ms N: N ms; 0: none, the window then
// holds the one-time costs) (its one-time costs -- compiling its hot paths,
// Node's async hooks -- show in the warm-up row, not in the window: the
// window is the steady cost of a service that has run a while).
//
//   own CPU     profiled CPU / unprofiled CPU of the same round - 1 (the whole
//               process: main thread, V8's profiler thread, exporters), with
//               the quartiles of the rounds and a bootstrap 90 % interval of
//               the median; ours / the anchor's and ours - the floor's median
//               get their own intervals (the rounds drawn again, paired), and
//               the goal's verdict is given only when the whole interval of
//               the ratio is on one side of 0.5
//   threads     CPU per thread (/proc/self/task/*/sched, ns), each also as the
//               median per-round difference from the unprofiled process
//   CPU ratio   median profiled CPU / median unprofiled CPU
//   memory      RSS, PSS and private bytes (/proc/self/smaps_rollup at the end
//               of the window, profiler still running) and peak RSS (VmHWM),
//               minus the same round's unprofiled process
//   labels      of the samples taken after the handler's `await`, the share
//               that carries the wrapper's `endpoint` label (and of those
//               before it, for reference), decoded from each profiler's
//               uploads to a loopback ingest server run here
//
// Both profilers run at their defaults (100 Hz; the anchor also profiles
// the heap, as its start() does) except the flush interval, the same for
// both so a round holds several periods. Writes the report to stdout and
// build/bench/node-report.txt, every number to build/bench/node-results.json.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { parseArgs } = require('node:util');

const ingest = require('./ingest');
const profiles = require('./profiles');

const HERE = __dirname;
const ROOT = path.resolve(HERE, '..', '..');
const WORKLOAD = path.join(HERE, 'workload.js');
const ANCHOR = '@pyroscope/nodejs';
const LABEL = { none: 'no profiler', v8floor: 'V8 profilers only',
                v8labels: 'V8 profilers + ALS + before hook',
                native: 'pyroscope-native', 'native-wall': 'ours, oncpu: false',
                'native-libcurl': 'ours, libcurl uploads',
                anchor: `${ANCHOR} 0.6.4` };
const CHILD_TIMEOUT_MS = Number(process.env.BENCH_CHILD_TIMEOUT_S || 300) * 1e3;
// Own-CPU rounds that spread wider than this (max - min, in points) get no
// met / not met verdict: the machine was too busy to tell.
const NOISY_SPREAD_PTS = 10;

const { values: opts } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    interleave: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    variants: { type: 'string', default: 'none,v8floor,native,anchor' },
    'warm-ms': { type: 'string', default: '' }, // profiled warm-up; default flush + 1 s
    'out-dir': { type: 'string', default: path.join(ROOT, 'build', 'bench') },
  },
});

// `name=native@DIR` is ours from another checkout DIR (built there), for an
// A/B of two builds in one run: e.g. --variants none,native,base=native@/tmp/base
const VARIANTS = opts.variants.split(',');
const ROOTS = {};
for (const v of VARIANTS) {
  const m = /^([\w-]+)=native@(.+)$/.exec(v);
  if (m) {
    ROOTS[v] = path.resolve(m[2]);
    LABEL[v] = `${m[1]} (${ROOTS[v]})`;
  }
}
if (VARIANTS[0] !== 'none' || VARIANTS.some((v) => !(v in LABEL))) {
  throw new Error(`--variants: 'none' first, then any of v8floor, v8labels, native, native-wall, native-libcurl, anchor, ` +
                  `NAME=native@DIR (got ${opts.variants})`);
}
const profilerOf = (v) => (ROOTS[v] ? 'native' : v);
// The window is a fixed amount of work (requests, not time): ~10 s here, so
// the few milliseconds a profiler adds stand out of the scheduler's noise.
// --interleave: every variant's process lives through the run and the
// rounds are windows of ~4 s taken in turn (the order rotating), so a
// change in the machine's load between rounds hits every variant alike.
// A window holds a profile restart or a heap snapshot or not, so its own
// CPU is the ratio of the sums over all windows, not a median of windows.
// Not the default: each process then idles 3/4 of the time, which is not
// the busy service the default measures, and changes what V8 does (in
// ours, a heap snapshot's forced GC in the idle time collects objects that
// optimised code of the async-hook paths holds weakly, so that code is
// deoptimised and compiled again in the next window: 6-16 functions a
// window against the anchor's 2-3, seen with --trace-opt --trace-deopt).
const INTERLEAVE = opts.interleave;
const ROUNDS = Number(opts.rounds || (opts.quick ? 2 : INTERLEAVE ? 24 : 9));
const WORK = opts.quick
  ? { requests: 600, iters: 200000, flushMs: 1000 }
  : { requests: INTERLEAVE ? 2000 : 5000, iters: 200000, flushMs: 5000 };

function log(msg) {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}

function quantile(xs, q) {
  const v = xs.filter((x) => x !== null && x !== undefined && !Number.isNaN(x))
    .sort((a, b) => a - b);
  if (!v.length) return null;
  const at = q * (v.length - 1);
  const lo = Math.floor(at);
  return lo + 1 < v.length ? v[lo] + (at - lo) * (v[lo + 1] - v[lo]) : v[lo];
}
const median = (xs) => quantile(xs, 0.5);
const sum = (xs) => xs.reduce((a, b) => a + b, 0);

// Own CPU in % of the rounds idx: the median of per-round ratios, or with
// --interleave the ratio of the sums (see INTERLEAVE).
function ownPct(cpu, base, idx) {
  if (INTERLEAVE) return (sum(idx.map((i) => cpu[i])) / sum(idx.map((i) => base[i])) - 1) * 100;
  return (median(idx.map((i) => cpu[i] / base[i])) - 1) * 100;
}
const allRounds = () => [...Array(ROUNDS).keys()];

// A bootstrap interval of a statistic of the rounds: the rounds are drawn
// again with replacement (a round keeps all its variants together, so
// paired ratios stay paired) BOOT times, and the 5th and 95th percentiles
// of the statistic over the draws are the 90 % interval. A fixed seed
// keeps a report reproducible from its numbers.
const BOOT = 4000;
function bootstrap(nRounds, stat) {
  let seed = 0x9e3779b9;
  const rand = () => { // xorshift32
    seed ^= seed << 13; seed >>>= 0;
    seed ^= seed >>> 17;
    seed ^= seed << 5; seed >>>= 0;
    return seed / 4294967296;
  };
  const draws = [];
  const idx = new Array(nRounds);
  for (let b = 0; b < BOOT; b++) {
    for (let i = 0; i < nRounds; i++) idx[i] = Math.floor(rand() * nRounds);
    const x = stat(idx);
    if (x !== null && Number.isFinite(x)) draws.push(x);
  }
  return [quantile(draws, 0.05), quantile(draws, 0.95)];
}

// ---------------------------------------------------------- one workload

function cleanEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('PYROSCOPE_') && !k.startsWith('OTEL_') && k !== 'NODE_OPTIONS') env[k] = v;
  }
  return env;
}

// One workload process: send() a command line, expect() its next event.
function startChild(variant, app, serverUrl) {
  const args = [WORKLOAD, '--profiler', profilerOf(variant), '--app', app, '--server', serverUrl,
    '--requests', String(WORK.requests), '--iters', String(WORK.iters),
    '--flush-ms', String(WORK.flushMs)];
  if (opts['warm-ms'] !== '') args.push('--warm-profiled-ms', opts['warm-ms']);
  if (ROOTS[variant]) args.push('--root', ROOTS[variant]);
  if (INTERLEAVE) args.push('--interleave');
  const child = spawn(process.execPath, args, { cwd: HERE, env: cleanEnv(),
                                                stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c) => { stderr = (stderr + c).slice(-4000); });
  const events = [];
  let waiter = null;
  let exit = null;
  const fail = () => new Error(`${variant} (${app}): exit ${exit}\n${stderr}`);
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    if (!line.startsWith('BENCH ')) return;
    events.push(JSON.parse(line.slice(6)));
    if (waiter) waiter();
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => {
    exit = code ?? signal;
    if (waiter) waiter();
    resolve(exit);
  }));
  return {
    send(line) { child.stdin.write(line + '\n'); },
    end(line) { child.stdin.end(line + '\n'); },
    kill() { if (exit === null) child.kill('SIGKILL'); },
    exited,
    async expect(name) {
      const deadline = Date.now() + CHILD_TIMEOUT_MS;
      while (!events.length) {
        if (exit !== null) throw fail();
        if (Date.now() > deadline) {
          child.kill('SIGKILL');
          throw new Error(`${variant}: no ${name} within ${CHILD_TIMEOUT_MS / 1000} s\n${stderr}`);
        }
        await new Promise((resolve) => {
          waiter = resolve;
          setTimeout(resolve, 1000);
        });
        waiter = null;
      }
      const ev = events.shift();
      if (ev.event !== name) throw new Error(`${variant}: ${ev.event} where ${name} was due\n${stderr}`);
      return ev;
    },
  };
}

async function finish(c) {
  const fin = await c.expect('final');
  const code = await c.exited;
  if (code !== 0) throw new Error(`workload exited ${code}`);
  return fin.stop_s;
}

// A fresh process for one window: its `result`, and how long stop() took.
async function runOne(variant, app, serverUrl) {
  const c = startChild(variant, app, serverUrl);
  try {
    await c.expect('ready');
    c.end('go');
    const res = await c.expect('result');
    return { ...res, stop_s: await finish(c) };
  } finally {
    c.kill();
  }
}

// --interleave: one process per variant, warmed in turn, then ROUNDS
// windows of each, the order rotating.
async function runInterleaved(serverUrl, runs) {
  const cs = {};
  try {
    for (const v of VARIANTS) cs[v] = startChild(v, `bench.node.${v.split('=')[0]}`, serverUrl);
    for (const v of VARIANTS) await cs[v].expect('ready');
    for (const v of VARIANTS) {
      cs[v].send('go');
      await cs[v].expect('warm');
    }
    for (let r = 0; r < ROUNDS; r++) {
      for (let i = 0; i < VARIANTS.length; i++) {
        const v = VARIANTS[(i + r) % VARIANTS.length];
        cs[v].send('window');
        const res = await cs[v].expect('result');
        res.app = `bench.node.${v.split('=')[0]}`;
        runs[v][r] = res;
        log(`window ${r + 1}/${ROUNDS} ${v}: cpu ${res.cpu_s.toFixed(3)} s`);
      }
    }
    for (const v of VARIANTS) cs[v].end('end');
    for (const v of VARIANTS) {
      const stop = await finish(cs[v]);
      for (const res of runs[v]) res.stop_s = stop;
    }
  } finally {
    for (const c of Object.values(cs)) c.kill();
  }
}

// ------------------------------------------------------------- labels

const AFTER = { checkoutAfterAwait: '/checkout', cartAfterAwait: '/cart' };
const BEFORE = { checkoutBeforeAwait: '/checkout', cartBeforeAwait: '/cart' };

// Samples in one side's functions, split by what their `endpoint` says.
function labelTally(samples, side) {
  const t = { samples: 0, right: 0, wrong: 0, unlabelled: 0 };
  for (const s of samples) {
    const fn = s.frames.map(profiles.frameFunction).find((f) => f in side);
    if (!fn) continue;
    t.samples += s.count;
    const got = s.labels.endpoint;
    if (got === undefined) t.unlabelled += s.count;
    else if (got === side[fn]) t.right += s.count;
    else t.wrong += s.count;
  }
  return t;
}

function addTally(a, b) {
  for (const k of Object.keys(b)) a[k] = (a[k] || 0) + b[k];
  return a;
}

async function uploadsByApp(kept) {
  const byApp = new Map();
  for (const req of kept) {
    let up;
    try {
      up = await ingest.decodeUpload(req);
    } catch (err) {
      log(`cannot decode an upload to ${req.url}: ${err.message}`);
      continue;
    }
    if (!byApp.has(up.app)) byApp.set(up.app, []);
    byApp.get(up.app).push(up);
  }
  return byApp;
}

// ------------------------------------------------------------- report

const pct = (x) => (x === null ? 'n/a' : `${x >= 0 ? '+' : ''}${x.toFixed(1)} %`);
const mib = (kib) => (kib === null ? 'n/a' : `${kib >= 0 ? '+' : ''}${(kib / 1024).toFixed(1)} MiB`);
const share = (n, d) => (d ? `${(100 * n / d).toFixed(1)} %` : 'n/a');

function summarise(runs, uploads) {
  const base = runs.none;
  const out = {};
  for (const v of VARIANTS) {
    const rs = runs[v];
    const per = (f) => rs.map((r, i) => f(r, base[i]));
    const cpuRatios = per((r, b) => r.cpu_s / b.cpu_s);
    const s = {
      cpu_s: rs.map((r) => r.cpu_s),
      warm_cpu_s: rs.map((r) => (r.warm_after_start ? r.warm_after_start.cpu_s : null)),
      wall_s: rs.map((r) => r.wall_s),
      stop_s: rs.map((r) => r.stop_s),
      cpu_ratio_per_round: cpuRatios,
      own_cpu_pct: ownPct(rs.map((r) => r.cpu_s), base.map((r) => r.cpu_s), allRounds()),
      own_cpu_pct_range: [(Math.min(...cpuRatios) - 1) * 100, (Math.max(...cpuRatios) - 1) * 100],
      own_cpu_pct_iqr: [(quantile(cpuRatios, 0.25) - 1) * 100, (quantile(cpuRatios, 0.75) - 1) * 100],
      own_cpu_pct_ci90: bootstrap(rs.length, (idx) => ownPct(rs.map((r) => r.cpu_s), base.map((r) => r.cpu_s), idx)),
      total_cpu_ratio: median(rs.map((r) => r.cpu_s)) / median(base.map((r) => r.cpu_s)),
      wall_ratio: median(per((r, b) => r.wall_s / b.wall_s)),
      added_kib: {},
      thread_cpu_s: {},
    };
    for (const k of ['rss_kib', 'pss_kib', 'private_kib', 'hwm_kib']) {
      s.added_kib[k] = median(per((r, b) => r[k] - b[k]));
    }
    s.load_kib = {};
    for (const k of ['rss_kib', 'pss_kib', 'private_kib']) {
      s.load_kib[k] = median(rs.map((r) => r[`load_${k}`]));
    }
    const names = new Set([...rs, ...base].flatMap((r) => Object.keys(r.thread_cpu_s)));
    s.thread_added_ms = {};
    for (const n of names) {
      s.thread_cpu_s[n] = median(rs.map((r) => r.thread_cpu_s[n] || 0));
      // paired with the same round's unprofiled process
      s.thread_added_ms[n] = median(per((r, b) => 1e3 * ((r.thread_cpu_s[n] || 0) - (b.thread_cpu_s[n] || 0))));
    }
    const medians = (key) => {
      if (!rs.every((r) => r[key])) return null;
      const m = {};
      for (const k of Object.keys(rs[0][key])) m[k] = median(rs.map((r) => r[key][k]));
      return m;
    };
    s.gc = medians('gc');
    s.sampler_costs = medians('sampler_costs');
    if (v !== 'none') {
      const after = {};
      const before = {};
      const rates = new Set();
      let nUploads = 0;
      for (const app of new Set(rs.map((r) => r.app))) {
        for (const up of uploads.get(app) || []) {
          nUploads++;
          for (const p of up.profiles) {
            if (!profiles.isTimeProfile(p)) continue;
            if (up.query.sampleRate) rates.add(up.query.sampleRate);
            const smp = profiles.timeSamples(p);
            addTally(after, labelTally(smp, AFTER));
            addTally(before, labelTally(smp, BEFORE));
          }
        }
      }
      Object.assign(s, { uploads: nUploads, sample_rates: [...rates], after_await: after,
                         before_await: before });
    }
    out[v] = s;
  }
  out.compare = compare(out);
  return out;
}

// Ours against the anchor (the ratio of the median own CPU, the goal's
// measure) and above the floor (points), each with its bootstrap interval
// over the same draws of rounds for both sides.
function compare(out) {
  const c = {};
  const ownOf = (v) => out[v] && out[v].cpu_s;
  const own = (v, idx) => ownPct(out[v].cpu_s, out.none.cpu_s, idx);
  const all = allRounds();
  for (const [key, a, b, f] of [
    ['native/anchor', 'native', 'anchor', (x, y) => x / y],
    ['native-v8floor', 'native', 'v8floor', (x, y) => x - y],
    ['v8floor/anchor', 'v8floor', 'anchor', (x, y) => x / y],
    ...Object.keys(ROOTS).map((v) => [`native-${v}`, 'native', v, (x, y) => x - y]),
  ]) {
    if (!ownOf(a) || !ownOf(b)) continue;
    c[key] = { value: f(own(a, all), own(b, all)),
               ci90: bootstrap(ROUNDS, (idx) => f(own(a, idx), own(b, idx))) };
  }
  return c;
}

function report(summary, meta) {
  const L = [];
  L.push(`Node.js binding against ${ANCHOR} 0.6.4 (${meta.rounds} ` +
         `${INTERLEAVE ? 'interleaved windows of one process per variant' : 'rounds of fresh processes'}, median; ` +
         `${meta.node}, ${meta.cpus} CPUs, load ${meta.loadavg})`);
  L.push(`workload: ${WORK.requests} requests x 2 handlers of ${WORK.iters} iterations, ` +
         `2 concurrent, an await between the halves; flush every ${WORK.flushMs} ms; ` +
         `profiled warm-up ${opts['warm-ms'] === '' ? WORK.flushMs + 1000 : Number(opts['warm-ms'])} ms`);
  L.push('');
  L.push('| | ' + VARIANTS.map((v) => LABEL[v]).join(' | ') + ' |');
  L.push('|---|' + VARIANTS.map(() => '---').join('|') + '|');
  const row = (name, f) => L.push(`| ${name} | ` + VARIANTS.map((v) => f(summary[v], v)).join(' | ') + ' |');
  row('CPU of the window (s)', (s) => median(s.cpu_s).toFixed(2));
  row('CPU of the warm-up after start() (s, same wall time)', (s) => {
    const m = median(s.warm_cpu_s);
    return m === null ? 'n/a' : m.toFixed(2);
  });
  row(INTERLEAVE ? 'own CPU (CPU of all windows / unprofiled - 1)' : 'own CPU (median of per-round ratio - 1)',
    (s, v) => (v === 'none' ? '-' : pct(s.own_cpu_pct)));
  row('  90 % interval of that (bootstrap)', (s, v) => (v === 'none' ? '-' :
    `${pct(s.own_cpu_pct_ci90[0])} .. ${pct(s.own_cpu_pct_ci90[1])}`));
  row('  rounds: quartiles / min .. max', (s, v) => (v === 'none' ? '-' :
    `${pct(s.own_cpu_pct_iqr[0])} .. ${pct(s.own_cpu_pct_iqr[1])} / ` +
    `${pct(s.own_cpu_pct_range[0])} .. ${pct(s.own_cpu_pct_range[1])}`));
  row('total CPU ratio', (s) => s.total_cpu_ratio.toFixed(3));
  row('wall ratio', (s) => s.wall_ratio.toFixed(3));
  row('RSS added', (s, v) => (v === 'none' ? '-' : mib(s.added_kib.rss_kib)));
  row('PSS added', (s, v) => (v === 'none' ? '-' : mib(s.added_kib.pss_kib)));
  row('private added', (s, v) => (v === 'none' ? '-' : mib(s.added_kib.private_kib)));
  row('peak RSS added', (s, v) => (v === 'none' ? '-' : mib(s.added_kib.hwm_kib)));
  row('of which require + init() (RSS / private)', (s, v) => (v === 'none' ? '-' :
    `${mib(s.load_kib.rss_kib)} / ${mib(s.load_kib.private_kib)}`));
  row('stop() (s)', (s, v) => (v === 'none' ? '-' : median(s.stop_s).toFixed(3)));
  row('uploads', (s, v) => (v === 'none' ? '-' : String(s.uploads)));
  row('sampleRate uploaded', (s, v) => (v === 'none' ? '-' : s.sample_rates.join(',') || 'n/a'));
  row('post-await samples labelled right', (s, v) => (v === 'none' ? '-' :
    `${share(s.after_await.right || 0, s.after_await.samples)} of ${Math.round(s.after_await.samples || 0)}`));
  row('post-await wrong / unlabelled', (s, v) => (v === 'none' ? '-' :
    `${Math.round(s.after_await.wrong || 0)} / ${Math.round(s.after_await.unlabelled || 0)}`));
  row('pre-await samples labelled right', (s, v) => (v === 'none' ? '-' :
    `${share(s.before_await.right || 0, s.before_await.samples)} of ${Math.round(s.before_await.samples || 0)}`));
  L.push('');
  L.push('CPU per thread in the window (median s; in brackets the median per-round ms added over ' +
         'the unprofiled process; main = the JS thread, node = V8\'s platform workers, ' +
         'v8:ProfEvntProc = V8\'s CPU profiler):');
  const threads = [...new Set(VARIANTS.flatMap((v) => Object.keys(summary[v].thread_cpu_s)))]
    .filter((n) => VARIANTS.some((v) => Math.abs(summary[v].thread_cpu_s[n] || 0) >= 0.0005))
    .sort((x, y) => (x === 'main' ? -1 : y === 'main' ? 1 : x.localeCompare(y)));
  L.push('| thread | ' + VARIANTS.map((v) => LABEL[v]).join(' | ') + ' |');
  L.push('|---|' + VARIANTS.map(() => '---').join('|') + '|');
  for (const n of threads) {
    L.push(`| ${n} | ` + VARIANTS.map((v) => {
      const s = summary[v];
      const x = s.thread_cpu_s[n];
      if (x === undefined) return '-';
      const d = s.thread_added_ms[n];
      return v === 'none' ? x.toFixed(3) : `${x.toFixed(3)} (${d >= 0 ? '+' : ''}${d.toFixed(1)})`;
    }).join(' | ') + ' |');
  }
  L.push('');
  L.push('Garbage collections in the window (median count / ms, perf_hooks):');
  for (const v of VARIANTS) {
    const g = summary[v].gc;
    if (g) L.push(`  ${LABEL[v]}: minor ${g.minor} / ${g.minor_ms.toFixed(1)}, major ${g.major} / ` +
                  `${g.major_ms.toFixed(1)}, other ${g.other} / ${g.other_ms.toFixed(1)}`);
  }
  for (const v of VARIANTS) {
    const c = summary[v].sampler_costs;
    if (!c) continue;
    L.push(`Profile restarts of ${LABEL[v]} (median over rounds, JS-thread ms): ` +
           Object.entries(c).map(([k, x]) => `${k} ${+x.toFixed(1)}`).join(', '));
  }
  const n = summary.native;
  const a = summary.anchor;
  if (n && a) {
    L.push('');
    L.push('Goals (issue 13): at most half of the anchor\'s CPU and memory cost, every ' +
           'post-await sample labelled.');
    const half = (x, y) => (x === null || y === null ? 'n/a' :
      `${(x / y).toFixed(2)}x the anchor's -> ${x <= y / 2 ? 'met' : 'NOT met'}`);
    // Settled only when the whole 90 % interval of the ratio is on one side.
    const spread = Math.max(...[n, a].map((s) => s.own_cpu_pct_range[1] - s.own_cpu_pct_range[0]));
    const cr = summary.compare['native/anchor'];
    const verdict = spread > NOISY_SPREAD_PTS ? `no verdict (rounds spread ${spread.toFixed(1)} points)`
      : ROUNDS < 5 ? 'no verdict (fewer than 5 rounds)'
      : !(a.own_cpu_pct_ci90[0] > 0) ? 'no verdict (the anchor\'s own CPU is not above 0)'
      : cr.ci90[1] <= 0.5 ? 'met' : cr.ci90[0] > 0.5 ? 'NOT met' : 'not settled (the interval holds 0.5)';
    L.push(`  own CPU:       ${pct(n.own_cpu_pct)} vs ${pct(a.own_cpu_pct)}: ` +
           `${cr.value.toFixed(2)}x the anchor's (90 % interval ${cr.ci90[0].toFixed(2)} .. ` +
           `${cr.ci90[1].toFixed(2)}) -> ${verdict}`);
    const fl = summary.compare['native-v8floor'];
    if (fl) {
      L.push(`  above the V8 floor: ${fl.value >= 0 ? '+' : ''}${fl.value.toFixed(2)} points (90 % interval ` +
             `${fl.ci90[0].toFixed(2)} .. ${fl.ci90[1].toFixed(2)}); the floor is ` +
             `${summary.compare['v8floor/anchor'].value.toFixed(2)}x the anchor's own CPU (90 % interval ` +
             `${summary.compare['v8floor/anchor'].ci90.map((x) => x.toFixed(2)).join(' .. ')})`);
    }
    L.push(`  PSS added:     ${mib(n.added_kib.pss_kib)} vs ${mib(a.added_kib.pss_kib)}: ${half(n.added_kib.pss_kib, a.added_kib.pss_kib)}`);
    L.push(`  RSS added:     ${mib(n.added_kib.rss_kib)} vs ${mib(a.added_kib.rss_kib)}: ${half(n.added_kib.rss_kib, a.added_kib.rss_kib)}`);
    const right = n.after_await.right || 0;
    L.push(`  post-await:    ${share(right, n.after_await.samples)} labelled right -> ` +
           `${n.after_await.samples && right === n.after_await.samples ? 'met' : 'NOT met'}`);
  }
  for (const v of Object.keys(ROOTS)) {
    const d = summary.compare[`native-${v}`];
    if (!d) continue;
    L.push(`A/B: own CPU of native minus ${LABEL[v]}: ${d.value >= 0 ? '+' : ''}${d.value.toFixed(2)} ` +
           `points (90 % interval ${d.ci90[0].toFixed(2)} .. ${d.ci90[1].toFixed(2)})`);
  }
  return L.join('\n') + '\n';
}

// ---------------------------------------------------------------- main

function checkInstalled() {
  if (VARIANTS.includes('anchor')) {
    try {
      require.resolve(ANCHOR, { paths: [HERE] });
    } catch {
      throw new Error(`${ANCHOR} is not installed: run 'npm ci' in ${HERE} (make bench-node does)`);
    }
  }
  for (const root of [...(VARIANTS.includes('native') || VARIANTS.includes('native-wall') ? [ROOT] : []),
    ...Object.values(ROOTS)]) {
    try {
      require(root);
    } catch (err) {
      throw new Error(`pyroscope-native does not load from ${root}: ${err.message}`);
    }
  }
}

async function main() {
  checkInstalled();
  const server = await ingest.startIngestServer();
  const runs = Object.fromEntries(VARIANTS.map((v) => [v, []]));
  const started = Date.now();
  if (INTERLEAVE) await runInterleaved(server.url, runs);
  else for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < VARIANTS.length; i++) {
      const v = VARIANTS[(i + r) % VARIANTS.length];
      const app = `bench.node.${v.split('=')[0]}.r${r}`;
      const res = await runOne(v, app, server.url);
      res.app = app;
      runs[v][r] = res;
      log(`round ${r + 1}/${ROUNDS} ${v}: cpu ${res.cpu_s.toFixed(3)} s, ` +
          `rss ${(res.rss_kib / 1024).toFixed(1)} MiB`);
    }
  }
  await server.close();
  const uploads = await uploadsByApp(server.kept);
  const summary = summarise(runs, uploads);
  const meta = { rounds: ROUNDS, node: process.version, cpus: os.cpus().length,
                 loadavg: os.loadavg().map((x) => x.toFixed(1)).join(' '),
                 seconds: Math.round((Date.now() - started) / 1000), work: WORK };
  const text = report(summary, meta);
  process.stdout.write(text);
  fs.mkdirSync(opts['out-dir'], { recursive: true });
  fs.writeFileSync(path.join(opts['out-dir'], 'node-report.txt'), text);
  fs.writeFileSync(path.join(opts['out-dir'], 'node-results.json'),
                   JSON.stringify({ meta, runs, summary }, null, 1));
  log(`done in ${meta.seconds} s; report and numbers in ${opts['out-dir']}/node-{report.txt,results.json}`);
}

main().catch((err) => {
  process.stderr.write(`bench-node: ${err.stack || err}\n`);
  process.exit(1);
});
