'use strict';
// The heap (memory) profile's cost on allocation-heavy Node, side by side.
//
//   node bench/node/alloc_cost.js [--rounds N] [--quick] [--json PATH]
//
// Each round runs every variant once, in a fresh process each, in turn (the order
// rotating between rounds), on two workloads: a JSON encode/decode loop and many small
// objects made and dropped. A run reports the CPU time (process.cpuUsage, all threads)
// of its workload alone, after the profiler started and a warm-up. The report gives per
// variant the median over rounds, and the ratio to `cpu` as the median of each round's
// own ratio (the machine's load, which changes between rounds, cancels within a round).
//
//   none         no profiler
//   cpu          pyroscope-native, on-CPU profile at 100 Hz, memory: false
//   cpu+memory   the same with memory: true (V8's sampling heap profiler at the default
//                512 KiB; its in-use snapshots at the default budget)
//   cpu+alloc    Node 26+: memory: true with heap.allocations (a v8.startHeapProfile
//                window per heap tick, collected objects kept)
//
// The repository root must be built (npm ci at the root). The cost of memory on is
// cpu+memory / cpu; of the whole profiler, cpu+memory / none.
const { execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const ROOT = path.join(__dirname, '..', '..');

const CHILD = `
const [variant, workload, iters, dir] = process.argv.slice(1);
let P = null;
if (variant !== 'none') {
  P = require(${JSON.stringify(ROOT)});
  P.init({ appName: 'bench.alloc', outputDir: dir, uploadInterval: 5, sampleRate: 100,
           memory: variant !== 'cpu', heap: { allocations: variant === 'cpu+alloc' } });
  P.start();
}
const doc = { id: 1, name: 'order', items: Array.from({ length: 20 }, (_, i) => ({
  sku: 'sku-' + i, qty: i, price: i * 1.25, tags: ['a', 'b', 'c'] })) };
let sink = 0;
function jsonLoop(n) {
  for (let i = 0; i < n; i++) {
    doc.id = i;
    const o = JSON.parse(JSON.stringify(doc));
    sink += o.items.length;
  }
}
function smallObjects(n) {
  let keep = null;
  for (let i = 0; i < n; i++) {
    const o = { i, s: 'k' + i, a: [i, i + 1], m: { x: i } };
    if ((i & 255) === 0) keep = o;
    sink += o.a.length;
  }
  return keep;
}
const work = workload === 'json' ? jsonLoop : smallObjects;
const n = Number(iters);
work(Math.ceil(n / 10)); // warm-up: compiled, and the profiler's first period under way
const c0 = process.cpuUsage();
work(n);
const c = process.cpuUsage(c0);
const ms = (c.user + c.system) / 1000;
(P ? P.stop() : Promise.resolve()).then(() => console.log(JSON.stringify({ ms, sink })));
`;

function parseArgs(argv) {
  const o = { rounds: 7, quick: false, json: null };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--rounds') o.rounds = Number(argv[++i]);
    else if (argv[i] === '--quick') o.quick = true;
    else if (argv[i] === '--json') o.json = argv[++i];
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (o.quick) o.rounds = 2;
  return o;
}

const median = (a) => {
  const s = [...a].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

function runOne(variant, workload, iters) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pn-alloc-'));
  try {
    const out = execFileSync(process.execPath, ['-e', CHILD, variant, workload, String(iters), dir],
      { encoding: 'utf8', timeout: 600000, stdio: ['ignore', 'pipe', 'inherit'] });
    return JSON.parse(out.trim().split('\n').pop()).ms;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const VARIANTS = ['none', 'cpu', 'cpu+memory'];
  if (typeof require('v8').startHeapProfile === 'function') VARIANTS.push('cpu+alloc');
  const WORKLOADS = { json: opts.quick ? 30000 : 150000, objects: opts.quick ? 2e6 : 3e7 };
  const res = {};
  for (const w of Object.keys(WORKLOADS)) {
    res[w] = Object.fromEntries(VARIANTS.map((v) => [v, []]));
  }
  for (let r = 0; r < opts.rounds; r++) {
    for (const w of Object.keys(WORKLOADS)) {
      const order = VARIANTS.map((_, i) => VARIANTS[(i + r) % VARIANTS.length]);
      for (const v of order) res[w][v].push(runOne(v, w, WORKLOADS[w]));
    }
    process.stderr.write(`round ${r + 1}/${opts.rounds} done\n`);
  }
  const mem = VARIANTS.slice(2);
  const L = [`Node ${process.version}, ${opts.rounds} rounds; CPU ms of the workload (median), ` +
    'ratios: medians of per-round ratios', '',
  `| workload | ${VARIANTS.join(' | ')} | cpu / none | ${mem.map((v) => `${v} / cpu`).join(' | ')} |`,
  `|---|${VARIANTS.map(() => '---|').join('')}---|${mem.map(() => '---|').join('')}`];
  const summary = {};
  for (const w of Object.keys(WORKLOADS)) {
    const m = res[w];
    const ratio = (a, b) => median(m[a].map((x, i) => x / m[b][i]));
    summary[w] = { runs: m, ratios: { 'cpu/none': ratio('cpu', 'none') } };
    for (const v of mem) summary[w].ratios[`${v}/cpu`] = ratio(v, 'cpu');
    L.push(`| ${w} | ${VARIANTS.map((v) => median(m[v]).toFixed(0)).join(' | ')} | ` +
      `${Object.values(summary[w].ratios).map((x) => x.toFixed(3)).join(' | ')} |`);
  }
  console.log(L.join('\n'));
  if (opts.json) fs.writeFileSync(opts.json, JSON.stringify(summary, null, 1));
}

main();
