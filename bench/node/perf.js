'use strict';
// Where a profiler's CPU goes, by `perf`: runs workload.js once per variant
// under `perf record -e cpu-clock -g` (JS frames named by --perf-basic-prof)
// against the loopback ingest server, for the same work, and writes one
// perf.data per variant. perf records the measured window only (enabled
// through its control fifo at the workload's `window` event), so neither
// start-up nor the warm-ups' one-time compiling is in it. Read them with e.g.
//
//   perf report -i build/bench/perf/native.data --no-children --sort comm,dso,sym
//
//   node bench/node/perf.js [--variants none,v8floor,native,anchor] [--requests 5000] [--out-dir DIR]
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
  },
});

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
  const child = spawn('perf', args, { cwd: __dirname, stdio: ['pipe', 'pipe', 'inherit'] });
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
  fs.mkdirSync(opts['out-dir'], { recursive: true });
  const server = await startIngestServer();
  try {
    for (const v of opts.variants.split(',').map(parseVariant)) {
      const { out, result } = await runOne(v, server.url);
      const t = result.thread_cpu_s;
      process.stdout.write(`${v.name}: ${out}  window cpu ${result.cpu_s.toFixed(3)} s, ` +
        `threads ${Object.keys(t).map((k) => `${k}=${t[k].toFixed(3)}`).join(' ')}\n`);
    }
  } finally {
    await server.close();
  }
}

main().catch((e) => {
  process.stderr.write(`perf.js: ${e && e.stack || e}\n`);
  process.exit(1);
});
