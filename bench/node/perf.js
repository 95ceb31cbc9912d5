'use strict';
// Where a profiler's CPU goes, by `perf`: runs workload.js once per variant
// under `perf record -e cpu-clock -g` (JS frames named by --perf-basic-prof)
// against the loopback ingest server, for the same work, and writes one
// perf.data per variant. perf records the measured window only (enabled
// through its control fifo at the workload's `window` event), so neither
// start-up nor the warm-ups' one-time compiling is in it. Then prints ms of
// CPU per window by thread and part, each sample going to the part of the
// first frame from its leaf that names one (PARTS: the application, our
// label code, async_hooks, GC, compilers, ...). Read the files further with
// e.g.
//
//   perf report -i build/bench/perf/native.data --no-children --sort comm,dso,sym
//
//   node bench/node/perf.js [--variants none,v8floor,native,anchor] [--requests 5000] [--out-dir DIR]
//   node bench/node/perf.js --table-only [--variants ...]   (the table from the files there)
//
// Variants as in run.js (NAME=native@DIR: another checkout). Not a timing
// tool: perf's own sampling at --freq slows everything a little alike.

const fs = require('node:fs');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');
const { parseArgs } = require('node:util');
const { startIngestServer } = require('./ingest');

const { values: opts } = parseArgs({
  options: {
    variants: { type: 'string', default: 'none,v8floor,native,anchor' },
    requests: { type: 'string', default: '5000' },
    freq: { type: 'string', default: '4999' },
    'out-dir': { type: 'string', default: path.join(__dirname, '..', '..', 'build', 'bench', 'perf') },
    'table-only': { type: 'boolean', default: false },
  },
});

// The parts a sample can belong to, tried on each frame from the leaf up;
// the first frame that names one decides (so a GC under our code is GC).
const PARTS = [
  ['app (workload.js)', /bench\/node\/workload\.js/],
  ['ours: label code (context.js)', /bindings\/node\/lib\/context\.js/],
  ['ours: profile restarts (sampler.js)', /bindings\/node\/lib\/sampler\.js/],
  ['ours: other JS', /bindings\/node\/lib\//],
  ['ours: addon', /pyroscope_native\.node/],
  ['anchor: JS and addon', /@pyroscope|@datadog|dd_pprof/],
  ['async_hooks / AsyncLocalStorage', /node:internal\/async_hooks|node:async_hooks|async_local_storage|PromiseHook|async_hooks_callback/],
  ['GC', /Heap::|MarkCompact|Scavenge|Sweeper|Marking|Evacuat|GCTracer|MinorMC|Mark.*Visitor/],
  ['compilers', /Compil|Maglev|Turbofan|compiler::|Sparkplug|Baseline|Deoptimiz/],
  ['inspector / V8 profilers', /inspector|Inspector|protocol::|V8ProfilerAgent|V8HeapProfilerAgent|SamplingHeapProfiler|CpuProfiler|ProfileGenerator|ProfilerListener|Sampler::/],
  ['timers, net, http (JS)', /node:internal\/timers|node:_http|node:net|node:internal\/stream|node:events|node:http/],
  ['kernel', /\[kernel/],
];

function partOf(stack) {
  for (const frame of stack) {
    for (const [name, rx] of PARTS) if (rx.test(frame)) return name;
  }
  return 'other: ' + (stack.length ? stack[0].replace(/.*\(/, '(') : '?');
}

// -> Map "thread | part" -> samples. The main thread is the lowest tid.
function attribute(file) {
  const text = execFileSync('perf', ['script', '-i', file, '-F', 'tid,comm,ip,sym,dso'],
    { encoding: 'utf8', maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'ignore'] });
  const blocks = [];
  let mainTid = Infinity;
  for (const block of text.split('\n\n')) {
    const lines = block.split('\n').filter((l) => l.trim());
    if (!lines.length) continue;
    const head = /^\s*(.+?)\s+(\d+)\s*$/.exec(lines[0]);
    if (!head) continue;
    const tid = Number(head[2]);
    mainTid = Math.min(mainTid, tid);
    blocks.push({ comm: head[1], tid, stack: lines.slice(1).map((l) => l.trim().replace(/^[0-9a-f]+\s+/, '')) });
  }
  const out = new Map();
  for (const b of blocks) {
    const k = (b.tid === mainTid ? 'main' : b.comm) + ' | ' + partOf(b.stack);
    out.set(k, (out.get(k) || 0) + 1);
  }
  return out;
}

function table(names) {
  const by = names.map((n) => attribute(path.join(opts['out-dir'], n + '.data')));
  const keys = [...new Set(by.flatMap((m) => [...m.keys()]))].sort();
  const ms = (n) => n * 1000 / Number(opts.freq);
  const L = ['ms of CPU in the window by thread | part (perf samples at ' + opts.freq + ' Hz; parts under 2 ms in every variant left out)',
    '| thread \\| part | ' + names.join(' | ') + ' |', '|---|' + names.map(() => '---:').join('|') + '|'];
  for (const k of keys) {
    const v = by.map((m) => ms(m.get(k) || 0));
    if (Math.max(...v) < 2) continue;
    L.push('| ' + k + ' | ' + v.map((x) => x.toFixed(1)).join(' | ') + ' |');
  }
  return L.join('\n') + '\n';
}

function parseVariant(v) {
  const m = /^([\w-]+)=native@(.+)$/.exec(v);
  return m ? { name: m[1], profiler: 'native', root: path.resolve(m[2]) }
    : { name: v, profiler: v, root: '' };
}

function runOne(variant, url) {
  const out = path.join(opts['out-dir'], variant.name + '.data');
  const ctl = path.join(opts['out-dir'], variant.name + '.ctl');
  fs.rmSync(ctl, { force: true });
  execFileSync('mkfifo', [ctl]);
  const args = ['record', '-q', '-e', 'cpu-clock', '-F', opts.freq, '-g', '-o', out,
    '-D', '-1', '--control', 'fifo:' + ctl, '--',
    process.execPath, '--perf-basic-prof', path.join(__dirname, 'workload.js'),
    '--profiler', variant.profiler, '--app', 'perf.' + variant.name, '--server', url,
    '--requests', opts.requests, '--announce-window'];
  if (variant.root) args.push('--root', variant.root);
  // cwd: the out dir, where V8 writes its isolate-*.log under --perf-basic-prof
  const child = spawn('perf', args, { cwd: opts['out-dir'], stdio: ['pipe', 'pipe', 'inherit'] });
  let buf = '';
  let result = null;
  let ctlFd = -1;
  const control = (cmd) => {
    if (ctlFd < 0) ctlFd = fs.openSync(ctl, 'w'); // perf holds the read end from its start
    fs.writeSync(ctlFd, cmd + '\n');
  };
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (!line.startsWith('BENCH ')) continue;
      const ev = JSON.parse(line.slice(6));
      if (ev.event === 'ready') child.stdin.write('go\n');
      if (ev.event === 'window') control('enable');
      if (ev.event === 'result') { control('disable'); result = ev; }
      if (ev.event === 'final') child.stdin.end();
    }
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => {
      if (ctlFd >= 0) fs.closeSync(ctlFd);
      fs.rmSync(ctl, { force: true });
      return code === 0 && result ? resolve({ out, result })
        : reject(new Error(`${variant.name}: perf/workload exited ${code}`));
    });
  });
}

async function main() {
  const variants = opts.variants.split(',').map(parseVariant);
  if (opts['table-only']) {
    process.stdout.write(table(variants.map((v) => v.name)));
    return;
  }
  fs.mkdirSync(opts['out-dir'], { recursive: true });
  const server = await startIngestServer();
  try {
    for (const v of variants) {
      const { out, result } = await runOne(v, server.url);
      const t = result.thread_cpu_s;
      process.stdout.write(`${v.name}: ${out}  window cpu ${result.cpu_s.toFixed(3)} s, ` +
        `threads ${Object.keys(t).map((k) => `${k}=${t[k].toFixed(3)}`).join(' ')}\n`);
    }
  } finally {
    await server.close();
  }
  process.stdout.write(table(variants.map((v) => v.name)));
}

main().catch((e) => {
  process.stderr.write(`perf.js: ${e && e.stack || e}\n`);
  process.exit(1);
});
