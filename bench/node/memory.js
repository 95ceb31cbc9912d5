'use strict';
// Where the Node profilers' memory goes (issue 13): a service workload
// like workload.js's (two labelled request loops, CPU before and after an
// await), measured at stages, with /proc/self/smaps broken down by
// mapping, V8's heap, and the process's threads.
//
//   node bench/node/memory.js [--rounds N] [--variants none,native,anchor]
//        [--requests N] [--flush-ms MS] [--detail] [--json FILE]
//
// A variant is `none`, `native`, `anchor`, or `LABEL=native@DIR`: this
// project's package from another checkout DIR (built there), which makes an
// A/B of two builds of ours in the same interleaved rounds. `native:cpu` /
// `native:heap` (also with LABEL= and @DIR) start only that profiler instead
// of start()'s both; `native:folder` writes to a temporary folder (outputDir)
// instead of uploading; `native:libcurl` uploads through libcurl instead of
// Node's own http (what the package did before); `native:nolabels` runs
// the requests without wrapWithLabels. Each round runs
// every variant once in a fresh process, the order rotating between rounds;
// the tables give medians over the rounds of each stage minus the same
// round's `none` process at that stage:
//
//   loaded    after require() of the package      init     after init()
//   started   after start()                        period1  after the first upload period
//   end       after all requests (profiler on)     stopped  after stop() resolved
//
// The breakdown groups mappings as: each shared object by name (libcurl and
// what it pulls in, our addon, ...), `arena` (anonymous mappings inside a
// 64 MiB-aligned glibc thread arena: malloc by threads other than main),
// `anon` (other anonymous memory: V8's heap, main-thread malloc, stacks),
// `[heap]` (brk: main-thread malloc) and the rest by name.
//
// Child mode (internal): node memory.js --child PROFILER ROOT SERVER ...

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const { parseArgs } = require('node:util');

const HERE = __dirname;
const ROOT = path.resolve(HERE, '..', '..');
const STAGES = ['loaded', 'init', 'started', 'period1', 'end', 'stopped'];
const ARENA = 64 * 1024 * 1024; // glibc's HEAP_MAX_SIZE on 64-bit

// ------------------------------------------------------------- smaps

// -> {group: {rss, pss, priv}} in KiB, plus `total`.
function smapsByGroup() {
  const text = fs.readFileSync('/proc/self/smaps', 'utf8');
  const maps = [];
  let cur = null;
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) {
      cur = { lo: BigInt('0x' + head[1]), hi: BigInt('0x' + head[2]), perms: head[3],
              name: head[4], rss: 0, pss: 0, priv: 0 };
      maps.push(cur);
      continue;
    }
    const m = /^(Rss|Pss|Private_Clean|Private_Dirty):\s+(\d+) kB/.exec(line);
    if (!m || !cur) continue;
    const v = Number(m[2]);
    if (m[1] === 'Rss') cur.rss += v;
    else if (m[1] === 'Pss') cur.pss += v;
    else cur.priv += v;
  }
  const out = { total: { rss: 0, pss: 0, priv: 0 } };
  const add = (g, mp) => {
    const o = out[g] || (out[g] = { rss: 0, pss: 0, priv: 0 });
    o.rss += mp.rss; o.pss += mp.pss; o.priv += mp.priv;
    out.total.rss += mp.rss; out.total.pss += mp.pss; out.total.priv += mp.priv;
  };
  // Thread arenas: 64 MiB-aligned reservations wholly covered by anonymous
  // mappings (the used part rw-p, the rest ---p; glibc's new_heap).
  const big = BigInt(ARENA);
  const cover = new Map();
  for (const mp of maps) {
    const base = mp.lo - (mp.lo % big);
    if (mp.name || mp.hi > base + big) continue;
    cover.set(base, (cover.get(base) || 0n) + (mp.hi - mp.lo));
  }
  for (const mp of maps) {
    let g;
    if (!mp.name) {
      const base = mp.lo - (mp.lo % big);
      g = cover.get(base) === big && mp.hi <= base + big ? 'arena' : 'anon';
    } else if (mp.name.startsWith('[')) {
      g = mp.name;
    } else {
      g = path.basename(mp.name).replace(/ \(deleted\)$/, '');
      if (g === path.basename(process.execPath)) g = 'node (binary)';
    }
    add(g, mp);
  }
  return out;
}

function threadNames() {
  const names = [];
  for (const tid of fs.readdirSync('/proc/self/task')) {
    try {
      names.push(fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim());
    } catch { /* ended meanwhile */ }
  }
  return names.sort();
}

function snapshot() {
  const mu = process.memoryUsage();
  const v8 = require('node:v8');
  const spaces = {};
  for (const s of v8.getHeapSpaceStatistics()) spaces[s.space_name] = s.physical_space_size >> 10;
  return {
    groups: smapsByGroup(),
    v8: { heapTotal: mu.heapTotal >> 10, heapUsed: mu.heapUsed >> 10, external: mu.external >> 10,
          arrayBuffers: mu.arrayBuffers >> 10, ...spaces },
    threads: threadNames(),
  };
}

// ------------------------------------------------------------- child

// ~1 ms of CPU per call, which the optimiser cannot drop (xorshift32).
function spin(n, x) {
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
  }
  return x;
}
const SEED = { '/checkout': 7, '/cart': 11 };

async function child(argv) {
  const [profiler, root, server, requestsS, flushS, only] = argv;
  const requests = Number(requestsS);
  const flushMs = Number(flushS);
  let P = null;
  let sink = 0;
  const handle = async (ep) => {
    sink = (sink + spin(300000, SEED[ep])) | 0;
    await new Promise((r) => setImmediate(r)); // as an I/O callback would
    sink = (sink + spin(300000, sink | 1)) | 0;
  };
  const request = (ep) => new Promise((resolve, reject) => {
    const fn = () => handle(ep).then(resolve, reject);
    if (P && only !== 'nolabels') P.wrapWithLabels({ endpoint: ep }, fn); else fn();
  });
  let next = 0;
  let until = Infinity;
  const serve = async (n, deadline) => {
    next = 0;
    until = deadline || Infinity;
    const loop = async (w) => {
      while (next < n && Date.now() < until) {
        next++;
        await request(w % 2 ? '/cart' : '/checkout');
      }
    };
    await Promise.all([loop(0), loop(1)]);
  };
  const out = {};
  const mark = (stage) => { out[stage] = snapshot(); };

  await serve(20);
  mark('base');
  if (profiler === 'native') {
    P = require(root);
    if (only === 'libcurl') require(path.join(root, 'bindings', 'node', 'lib', 'native')).setUploadClient('libcurl');
  }
  else if (profiler === 'anchor') { const m = require('@pyroscope/nodejs'); P = m.default || m; }
  mark('loaded');
  let folder = null;
  if (P && only === 'folder') {
    folder = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'pn-memory-'));
    P.init({ appName: 'bench.memory', outputDir: folder, flushIntervalMs: flushMs });
  } else if (P) {
    P.init({ appName: 'bench.memory', serverAddress: server, flushIntervalMs: flushMs });
  }
  mark('init');
  if (P && only === 'cpu') P.startCpuProfiling();
  else if (P && only === 'heap') P.startHeapProfiling();
  else if (P) P.start();
  mark('started');
  // Past the first upload (flush interval + a margin for the upload).
  await serve(1e9, Date.now() + flushMs + 1500);
  mark('period1');
  await serve(requests);
  mark('end');
  if (P) await P.stop();
  mark('stopped');
  if (folder) fs.rmSync(folder, { recursive: true, force: true });
  process.stdout.write('MEMORY ' + JSON.stringify(out) + '\n');
  if (sink === 42) process.stdout.write('');
}

// ------------------------------------------------------------- parent

function median(xs) {
  const v = xs.filter((x) => typeof x === 'number').sort((a, b) => a - b);
  if (!v.length) return 0;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

function parseVariant(spec) {
  const m = /^(?:([\w.-]+)=)?(none|native|anchor)(?::(cpu|heap|folder|libcurl|nolabels))?(?:@(.+))?$/.exec(spec);
  if (!m) throw new Error(`--variants: '${spec}' is not none, native, anchor or LABEL=native[:cpu|:heap|:folder|:libcurl|:nolabels][@DIR]`);
  return { label: m[1] || m[2], profiler: m[2], only: m[3] || 'both', root: path.resolve(m[4] || ROOT) };
}

function runChild(v, server, o) {
  const env = {};
  for (const [k, val] of Object.entries(process.env)) {
    if (!k.startsWith('PYROSCOPE_') && !k.startsWith('OTEL_') && k !== 'NODE_OPTIONS') env[k] = val;
  }
  const c = spawn(process.execPath, [__filename, '--child', v.profiler, v.root, server,
    String(o.requests), String(o.flushMs), v.only], { cwd: HERE, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  let result = null;
  c.stderr.on('data', (d) => { err = (err + d).slice(-4000); });
  readline.createInterface({ input: c.stdout }).on('line', (l) => {
    if (l.startsWith('MEMORY ')) result = JSON.parse(l.slice(7));
  });
  return new Promise((resolve, reject) => c.on('exit', (code) => {
    if (code === 0 && result) resolve(result);
    else reject(new Error(`${v.label}: exit ${code}\n${err}`));
  }));
}

const fmt = (kib) => `${kib >= 0 ? '+' : ''}${(kib / 1024).toFixed(2)}`;

function table(head, rows) {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (r) => r.map((c, i) => (i ? String(c).padStart(w[i]) : String(c).padEnd(w[i]))).join('  ');
  return [line(head), ...rows.map(line)].join('\n');
}

async function parent() {
  const { values: o } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      variants: { type: 'string', default: 'none,native,anchor' },
      requests: { type: 'string', default: '1500' },
      'flush-ms': { type: 'string', default: '5000' },
      detail: { type: 'boolean', default: false },
      json: { type: 'string' },
    },
  });
  const variants = o.variants.split(',').map(parseVariant);
  if (variants[0].profiler !== 'none') throw new Error('--variants: none first');
  const ingest = require('./ingest');
  const srv = await ingest.startIngestServer();
  const runs = Object.fromEntries(variants.map((v) => [v.label, []]));
  const rounds = Number(o.rounds);
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < variants.length; i++) {
      const v = variants[(i + r) % variants.length];
      process.stderr.write(`[memory] round ${r + 1}/${rounds}: ${v.label}\n`);
      runs[v.label].push(await runChild(v, srv.url, { requests: o.requests, flushMs: o['flush-ms'] }));
      srv.kept.length = 0;
    }
  }
  await srv.close();
  if (o.json) fs.writeFileSync(o.json, JSON.stringify(runs));

  const base = runs.none;
  const added = (label, stage, get) => median(runs[label].map((x, i) => get(x[stage]) - get(base[i][stage])));
  const others = variants.slice(1).map((v) => v.label);
  // Totals per stage.
  const rows = [];
  for (const stage of STAGES) {
    for (const k of ['rss', 'pss', 'priv']) {
      rows.push([`${stage} ${k}`, ...others.map((l) => fmt(added(l, stage, (s) => s.groups.total[k])))]);
    }
  }
  console.log('MiB added over `none` at each stage (medians of ' + rounds + ' rounds)\n');
  console.log(table(['stage', ...others], rows));
  // Breakdown at chosen stages.
  for (const stage of o.detail ? STAGES : ['init', 'end']) {
    const groups = new Set();
    for (const l of others) for (const x of runs[l]) for (const g of Object.keys(x[stage].groups)) groups.add(g);
    for (const x of base) for (const g of Object.keys(x[stage].groups)) groups.add(g);
    const grow = [];
    for (const g of [...groups].filter((n) => n !== 'total').sort()) {
      const vals = others.map((l) => ['rss', 'priv'].map((k) => added(l, stage, (s) => (s.groups[g] || {})[k] || 0)));
      if (vals.every((pair) => pair.every((x) => Math.abs(x) < 64))) continue;
      grow.push([g, ...vals.map(([a, b]) => `${fmt(a)} / ${fmt(b)}`)]);
    }
    const v8rows = Object.keys(base[0][stage].v8).map((k) =>
      [`v8 ${k}`, ...others.map((l) => fmt(added(l, stage, (s) => s.v8[k] || 0)))])
      .filter((r) => r.slice(1).some((c) => Math.abs(parseFloat(c)) >= 0.06));
    console.log(`\nat ${stage}: RSS / private MiB added per mapping group (|x| >= 64 KiB), V8 heap\n`);
    console.log(table(['group', ...others], [...grow, ...v8rows]));
    const extra = (l) => {
      const left = [...base[0][stage].threads];
      return runs[l][0][stage].threads.filter((t) => {
        const i = left.indexOf(t);
        if (i < 0) return true;
        left.splice(i, 1);
        return false;
      });
    };
    console.log('threads added: ' + others.map((l) => `${l}: ${extra(l).join(', ') || 'none'}`).join('; '));
  }
}

if (process.argv[2] === '--child') {
  child(process.argv.slice(3)).catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
} else {
  parent().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
}
