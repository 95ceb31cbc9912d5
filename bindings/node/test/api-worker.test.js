'use strict';
// Worker threads (issue 28 §4): init()/start() in a worker profile that worker into the
// process's profile, its samples labelled thread_name and with its own labels; workers
// that come and go while the main thread samples crash nothing. Each case runs in a
// child process (test/fixtures/worker-child.js), so a crash fails only it.
const assert = require('assert');
const { spawnSync } = require('child_process');
const path = require('path');
const { tmpdir, rmdir, profiles, samples } = require('./native_helpers');

const CHILD = path.join(__dirname, 'fixtures', 'worker-child.js');

function runChild(mode, dir) {
  const r = spawnSync(process.execPath, [CHILD, mode, dir], { encoding: 'utf8', timeout: 120000 });
  assert.strictEqual(r.status, 0, `child ${mode}: exit ${r.status} ${r.signal || ''}\n${r.stderr}`);
  const line = r.stdout.trim().split('\n').pop();
  const o = JSON.parse(line);
  assert.ok(!o.fatal, o.fatal);
  return o;
}

// CPU ns of the cpu profiles' samples by a key of their labels.
function cpuBy(list, key) {
  const out = {};
  for (const s of list) {
    const k = key(s.labels);
    out[k] = (out[k] || 0) + s.values[s.types.indexOf('cpu')];
  }
  return out;
}

describe('api: worker threads', function () {
  this.timeout(150000);
  let dir;
  beforeEach(() => { dir = tmpdir('worker'); });
  afterEach(() => rmdir(dir));

  it('a worker and the main thread: each one\'s CPU under its labels and thread_name', function () {
    const r = runChild('split', dir);
    assert.strictEqual(r.error, null, r.error);
    assert.ok(r.worker, 'the worker never reported');
    const list = samples(profiles(dir, 'cpu'));
    const byThread = cpuBy(list, (l) => l.thread_name || '(none)');
    const wName = r.worker.thread.name;
    // the Worker's name option where Node tells it to the worker (threadName), else its id
    if ('threadName' in require('worker_threads')) assert.strictEqual(wName, 'burner');
    else assert.match(wName, /^worker-\d+$/);
    const wProf = (byThread[wName] || 0) / 1e6;
    const mProf = (byThread.main || 0) / 1e6;
    const msg = JSON.stringify({ byThread, truth: { worker: r.worker.cpuMs, main: r.mainCpuMs },
                                 join: r.stats.join });
    // each thread's profile holds its own CPU (ms measured on that thread)
    assert.ok(Math.abs(wProf - r.worker.cpuMs) <= 0.15 * r.worker.cpuMs, 'worker: ' + msg);
    assert.ok(Math.abs(mProf - r.mainCpuMs) <= 0.15 * r.mainCpuMs, 'main: ' + msg);
    // and the split between them is the true one within a few points
    const share = wProf / (wProf + mProf);
    const truth = r.worker.cpuMs / (r.worker.cpuMs + r.mainCpuMs);
    assert.ok(Math.abs(share - truth) <= 0.05, `worker share ${share.toFixed(3)} vs ${truth.toFixed(3)}: ${msg}`);
    // labels set in a thread label that thread's samples only
    const byPhase = cpuBy(list, (l) => (l.phase || '-') + '/' + (l.thread_name || '-'));
    assert.ok(!byPhase['A/main'] && !byPhase[`B/${wName}`], JSON.stringify(byPhase));
    assert.ok(byPhase[`A/${wName}`] / 1e6 >= 0.8 * r.worker.cpuMs, JSON.stringify(byPhase));
    assert.ok(byPhase['B/main'] / 1e6 >= 0.7 * r.mainCpuMs, JSON.stringify(byPhase));
    assert.strictEqual(r.worker.thread.role, 'joined');
  });

  it('short-lived workers started and terminated while sampling: no crash, profiles arrive', function () {
    const r = runChild('churn', dir);
    assert.deepStrictEqual(r.errors, []);
    assert.strictEqual(r.terminated, 12);
    // every worker registered its thread and gave its entry back, terminated or not
    assert.strictEqual(r.threadsAfter.live, 1, JSON.stringify(r.threadsAfter));
    assert.strictEqual(r.threadsAfter.registered, 25, JSON.stringify(r.threadsAfter));
    assert.strictEqual(r.threadsAfter.released, 24, JSON.stringify(r.threadsAfter));
    const list = samples(profiles(dir, 'cpu'));
    const byThread = cpuBy(list, (l) => (l.thread_name || '').replace(/\d+$/, 'N'));
    assert.ok(byThread['worker-N'] > 0, JSON.stringify(byThread));
    // the main thread's profile goes on after them
    const after = cpuBy(list, (l) => l.phase || '-').after || 0;
    assert.ok(after / 1e6 >= 100, `${after / 1e6} ms under phase=after: ${JSON.stringify(r.stats.join)}`);
  });

  it('a worker joins the next agent when the main thread stops and starts again', function () {
    const r = runChild('restart', dir);
    assert.strictEqual(r.error, null, r.error);
    assert.ok(r.worker, 'the worker never reported');
    assert.strictEqual(r.worker.thread.agentGone, 1);
    const list = samples(profiles(path.join(dir, 'second'), 'cpu'));
    const w = cpuBy(list, (l) => `${l.phase || '-'}/${(l.thread_name || '').replace(/\d+$/, 'N')}`);
    assert.ok((w['W/worker-N'] || 0) / 1e6 >= 100, JSON.stringify(w));
  });

  it('init(), start() and stop() in a worker never throw', function () {
    const r = runChild('init', dir);
    for (const [name, res] of Object.entries(r)) {
      assert.strictEqual(res.error, null, `${name}: ${res.error}`);
      for (const call of ['init', 'start', 'labels', 'stop']) {
        assert.strictEqual(res.msg[call], 'ok', `${name}: ${call}: ${res.msg[call]}`);
      }
    }
    // alone in the process, the worker started the agent itself
    assert.strictEqual(r.alone.msg.thread.role, 'owner');
    // options that cannot work are counted (and logged once), not thrown
    assert.ok(r.bad.msg.thread.initErrors >= 1, JSON.stringify(r.bad.msg.thread));
  });
});
