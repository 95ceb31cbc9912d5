'use strict';
// The flame graph of a folder output: written by stop() and at exit for the profiles the
// run wrote (and only those), by writeReport() and by the pyroscope-native CLI, from the
// core's report library. The hot function's own time is in its callee (cpuUsage), so the
// text checks list every function (--top 50), not the first few by self time. The page's embedded data (JSON in <script id="pn-data">) is
// parsed, not grepped.
const assert = require('assert');
const { execFile } = require('child_process');
const fs = require('fs');
const path = require('path');
const { loadNative, tmpdir, burn } = require('./api-helpers');

const native = loadNative();
const api = require('../lib');
const LIB = path.join(__dirname, '..', 'lib');
const BIN = path.join(__dirname, '..', 'bin', 'pyroscope-native.js');

function run(args, opts) {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { timeout: 60000, ...opts }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code === undefined ? -1 : err.code) : 0, stdout, stderr });
    });
  });
}

// The page's function names (its data's string table).
function pageNames(file) {
  const html = fs.readFileSync(file, 'utf8');
  const m = /<script id="pn-data" type="application\/json">([\s\S]*?)<\/script>/.exec(html);
  assert.ok(m, `${file} has no pn-data block`);
  const data = JSON.parse(m[1]);
  assert.ok(Array.isArray(data.names), 'the page data has names');
  return data.names;
}

// Shown by its plain name, as Python's and Ruby's functions are (the wire name
// is the anchor's "./file.js:fn:line"; the report cuts the file and line out).
function named(names, fn) {
  return names.some((n) => typeof n === 'string' && (n === fn || n.startsWith(`${fn} (`)));
}

// A profiled child that burns CPU in reportHotFunction and then ends by `how`: 'exit'
// (process.exit() without stop(): the 'exit' handler writes the page synchronously) or
// 'stop' (stop(), whose promise writes it; a script that just ends stops the same way).
function childScript(dir, how) {
  return `
    const api = require(${JSON.stringify(LIB)});
    api.init({ appName: 'report.child', outputDir: ${JSON.stringify(dir)}, uploadInterval: 1,
               tags: { phase: 'hot' } });
    api.start();
    function reportHotFunction(ms) {
      const end = process.cpuUsage().user + ms * 1000;
      let x = 0;
      while (process.cpuUsage().user < end) x += Math.sqrt(x + 1);
      return x;
    }
    reportHotFunction(600);
    ${how === 'stop' ? "api.stop().then(() => console.log('stopped'));" : 'process.exit(0);'}
  `;
}

describe('report: flame graph of the folder output', function () {
  this.timeout(60000);
  before(function () {
    if (!native) this.skip();
  });
  afterEach(() => api.stop());

  // One child run serves the page and CLI checks.
  let dir;
  before(async function () {
    if (!native) return;
    dir = tmpdir('pn-report-');
    // A profile from an earlier run, unreadable: the page must leave it out (or it fails).
    fs.writeFileSync(path.join(dir, 'old.app-cpu-1-2.pb.gz'), 'not a profile');
    const r = await run(['-e', childScript(dir, 'exit')], { env: { ...process.env, PYROSCOPE_LOG_LEVEL: 'info' } });
    assert.strictEqual(r.code, 0, r.stderr);
  });

  it('process.exit() without stop() writes flamegraph.html of this run\'s profiles only', () => {
    const page = path.join(dir, 'flamegraph.html');
    assert.ok(fs.existsSync(page), `no page in ${fs.readdirSync(dir).join(', ')}`);
    assert.ok(named(pageNames(page), 'reportHotFunction'), 'the page names the hot function');
    // the heap profiler's periods (when one was cut before the exit) get their own page
    const heap = fs.readdirSync(dir).some((n) => n.startsWith('report.child-heap-'));
    assert.strictEqual(fs.existsSync(path.join(dir, 'flamegraph-heap.html')), heap);
  });

  it('stop() writes the page before it resolves', async () => {
    const d = tmpdir('pn-report-stop-');
    const r = await run(['-e', childScript(d, 'stop')]);
    assert.strictEqual(r.code, 0, r.stderr);
    assert.match(r.stdout, /stopped/);
    assert.ok(named(pageNames(path.join(d, 'flamegraph.html')), 'reportHotFunction'));
  });

  it('stop() in this process: a page, and an unwritable one is logged, never thrown', async () => {
    const d = tmpdir('pn-report-inproc-');
    const logged = [];
    api.setLogger({ debug() {}, info: (m) => logged.push(m), warn: (m) => logged.push(m), error: (m) => logged.push(m) });
    try {
      api.init({ appName: 'report.inproc', outputDir: d, uploadInterval: 1 });
      api.start();
      function inProcessHot() { return burn(300); }
      inProcessHot();
      // a folder where the page should go: writing it fails, stop still resolves
      fs.mkdirSync(path.join(d, 'flamegraph.html'));
      await api.stop();
      // the log reaches the logger through the native log bridge, a turn or more later
      const deadline = Date.now() + 20000;
      while (!logged.some((m) => /cannot write the flame graph/.test(String(m))) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      api.setLogger(null);
    }
    assert.ok(logged.some((m) => /cannot write the flame graph/.test(String(m))),
      `logged: ${JSON.stringify(logged)}`);
    const r = await api.writeReport(d, { output: path.join(d, 'again.html') });
    assert.ok(r.profiles > 0);
    assert.match(r.text, /inProcessHot/);
    assert.ok(named(pageNames(path.join(d, 'again.html')), 'inProcessHot'));
  });

  it('writeReport filters by label and breaks down by one; a bad filter is a clear error', async () => {
    const fresh = tmpdir('pn-report-api-');
    for (const f of fs.readdirSync(dir).filter((n) => n.startsWith('report.child-cpu-'))) {
      fs.copyFileSync(path.join(dir, f), path.join(fresh, f));
    }
    const hot = await api.writeReport(fresh, { filter: { phase: 'hot' }, groupBy: 'phase', top: 50, output: null });
    assert.strictEqual(hot.output, null);
    assert.strictEqual(hot.type, 'cpu');
    assert.match(hot.text, /by phase/);
    assert.match(hot.text, /reportHotFunction/);
    const none = await api.writeReport(fresh, { filter: ['phase=cold'], output: null });
    assert.doesNotMatch(none.text, /reportHotFunction/);
    await assert.rejects(api.writeReport(fresh, { filter: ['phase'] }),
      (e) => e.code === 'ERR_PYROSCOPE_REPORT' && /filter: expected KEY=VALUE/.test(e.message));
    await assert.rejects(api.writeReport(fresh, { type: 'wall' }),
      (e) => e.code === 'ERR_PYROSCOPE_REPORT' && /no wall profiles/.test(e.message));
    await assert.rejects(api.writeReport(fresh, { colour: 'red' }), /unknown option colour/);
    // one type per page: a folder's other types are left out and named; their page has
    // its own name (a copy named as a wall profile stands for one here)
    const cpuFile = fs.readdirSync(fresh).find((n) => n.includes('-cpu-'));
    fs.copyFileSync(path.join(fresh, cpuFile), path.join(fresh, 'other-wall-10-20.pb.gz'));
    const byDefault = await api.writeReport(fresh, { top: 0 });
    assert.deepStrictEqual([byDefault.type, byDefault.otherTypes], ['cpu', ['wall']]);
    assert.strictEqual(byDefault.output, path.join(fresh, 'flamegraph.html'));
    const wall = await api.writeReport(fresh, { type: 'wall', top: 0 });
    assert.deepStrictEqual([wall.profiles, wall.otherTypes], [1, ['cpu']]);
    assert.strictEqual(wall.output, path.join(fresh, 'flamegraph-wall.html'));
    assert.ok(fs.existsSync(wall.output));
    // a file given by name is read as is: the core names what is wrong with it
    await assert.rejects(api.writeReport(path.join(dir, 'old.app-cpu-1-2.pb.gz'), { output: null }),
      (e) => e.code && /old\.app-cpu-1-2\.pb\.gz/.test(e.message));
  });

  it('a run\'s pages are the core\'s, titled by the app and type, and written once', async () => {
    // the 360-newest limit and the messages: tests/c/test_report_options.c
    const report = require('../lib/report');
    const addon = require('../lib/addon');
    const d = tmpdir('pn-report-run-');
    const cpuFile = fs.readdirSync(dir).find((n) => n.startsWith('report.child-cpu-'));
    fs.copyFileSync(path.join(dir, cpuFile), path.join(d, 'app-cpu-1000-1001.pb.gz')); // earlier
    api.init({ appName: 'report.run', outputDir: d, uploadInterval: 1 });
    api.start();
    fs.copyFileSync(path.join(dir, cpuFile), path.join(d, 'app-wall-2000-2001.pb.gz')); // this run's
    await api.stop();
    const html = fs.readFileSync(path.join(d, 'flamegraph-wall.html'), 'utf8');
    assert.match(html, /<title>report\.run \(wall\)<\/title>/);
    fs.unlinkSync(path.join(d, 'flamegraph-wall.html'));
    report.endRunSync(addon); // taken once: a second end (the exit after a stop) writes nothing
    await report.endRun(addon);
    assert.ok(!fs.existsSync(path.join(d, 'flamegraph-wall.html')));
  });

  it('the CLI prints the top table and writes the page; a bad filter exits 2 naming --filter; --diff alone compares two paths', async () => {
    const out = path.join(tmpdir('pn-report-cli-'), 'page.html');
    // this run's files (the folder also holds the unreadable old profile: see below)
    const files = fs.readdirSync(dir).filter((n) => n.startsWith('report.child-cpu-')).map((n) => path.join(dir, n));
    const ok = await run([BIN, 'report', ...files, '--top', '50', '--output', out]);
    assert.strictEqual(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /Top \d+ of \d+ functions by self cpu/);
    assert.match(ok.stdout, /reportHotFunction/);
    assert.match(ok.stdout, /profiles? read, flame graph: .*page\.html/);
    assert.ok(named(pageNames(out), 'reportHotFunction'));

    const diff = await run([BIN, 'report', '--diff', 'phase=hot', 'phase=cold', ...files, '--top', '50', '-o', out]);
    assert.strictEqual(diff.code, 0, diff.stderr);
    assert.match(diff.stdout, /^Diff of self cpu time/m);
    assert.match(diff.stdout, /^A: phase=hot \(total (?!0 ns)[^,]+, [1-9]\d* samples\)$/m);
    assert.match(diff.stdout, /^B: phase=cold \(total 0 ns, 0 samples\)$/m);

    const bad = await run([BIN, 'report', dir, '--filter', 'phase']);
    assert.strictEqual(bad.code, 2);
    assert.match(bad.stderr, /pyroscope-native: --filter: expected KEY=VALUE, got "phase"/);
    const unreadable = await run([BIN, 'report', dir]);
    assert.strictEqual(unreadable.code, 1);
    assert.match(unreadable.stderr, /^pyroscope-native: .*old\.app-cpu-1-2\.pb\.gz/m);
    const missing = await run([BIN, 'report', path.join(dir, 'nothing-here')]);
    assert.strictEqual(missing.code, 2);
    assert.match(missing.stderr, /nothing-here: no such file or folder/);
    // The core's command line, as Python's and Ruby's: --diff alone compares two paths by
    // their source label; a bad value names the flag, then the usage.
    const two = await run([BIN, 'report', files[0], files[files.length - 1], '--diff', '-o', out]);
    assert.strictEqual(two.code, 0, two.stderr);
    assert.ok(two.stdout.includes(`A: source=${files[0]} (total`), two.stdout);
    const top = await run([BIN, 'report', dir, '--top', '-1']);
    assert.strictEqual(top.code, 2);
    assert.match(top.stderr, /^pyroscope-native: --top: "-1" is not a whole number >= 0\nusage: pyroscope-native report PATH/);
  });
});
