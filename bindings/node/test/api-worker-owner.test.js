'use strict';
// The process's agent and the threads that own or join it (review of the worker-thread
// support): the owner's stop() with a joined worker, the owner worker ending, start()
// in several threads at once, the heap warning. Each case runs in a child process
// (test/fixtures/worker-owner-child.js) that waits for events, not for CPU shares.
const assert = require('assert');
const { spawnSync } = require('child_process');
const path = require('path');
const { tmpdir, rmdir, profiles, samples } = require('./native_helpers');

const CHILD = path.join(__dirname, 'fixtures', 'worker-owner-child.js');

function runChild(args) {
  const r = spawnSync(process.execPath, [CHILD, ...args], { encoding: 'utf8', timeout: 120000 });
  assert.strictEqual(r.status, 0, `child ${args[0]}: exit ${r.status} ${r.signal || ''}\n${r.stderr}`);
  const o = JSON.parse(r.stdout.trim().split('\n').pop());
  assert.ok(!o.fatal, o.fatal);
  o.stderr = r.stderr;
  return o;
}

describe('api: the agent\'s owner and the threads that joined it', function () {
  this.timeout(150000);
  let dir;
  beforeEach(() => { dir = tmpdir('owner'); });
  afterEach(() => rmdir(dir));

  it('the owner\'s stop() does not wait for a joined worker still running', function () {
    // stop_timeout is 20 s: a stop that waits for the worker's samples takes all of it
    const r = runChild(['stop', dir]);
    assert.strictEqual(r.workerRole, 'joined');
    assert.ok(r.stopMs < 10000, `stop() took ${r.stopMs} ms`);
    assert.strictEqual(r.uploads.dropped, 0, JSON.stringify(r.uploads));
    assert.strictEqual(r.uploads.failed, 0, JSON.stringify(r.uploads));
    assert.ok(r.uploads.ok >= 1, JSON.stringify(r.uploads));
    // the last period (main's CPU just before stop()) is written
    const list = samples(profiles(dir, 'cpu'));
    assert.ok(list.some((s) => s.labels.phase === 'main'), `no main sample in ${r.cpuFiles} profiles`);
    assert.ok(list.some((s) => s.labels.phase === 'worker'), 'no worker sample');
  });

  it('the owner\'s process.exit() does not wait for a joined worker still running', function () {
    const r = runChild(['exit', dir]);
    assert.strictEqual(r.workerRole, 'joined');
    assert.ok(r.exitMs < 10000, `the exit handler took ${r.exitMs} ms`);
    const list = samples(profiles(dir, 'cpu'));
    assert.ok(list.some((s) => s.labels.phase === 'main'), 'the last period was not written');
  });

  for (const how of ['stop', 'terminate']) {
    it(`the main thread is still profiled after the worker that started the agent ends (${how})`, function () {
      const r = runChild(['gone', dir, how]);
      assert.strictEqual(r.workerRole, 'owner');
      assert.strictEqual(r.mainRole, 'joined');
      assert.ok(r.running, 'the agent stopped with its owner: ' + JSON.stringify(r.thread));
      assert.strictEqual(r.roleAfter, 'owner', JSON.stringify(r.thread));
      assert.strictEqual(r.heapAfter, true, 'the new owner runs the heap profile its start() asked for');
      const after = samples(profiles(dir, 'cpu')).filter((s) => s.labels.phase === 'after');
      assert.ok(after.length > 0, 'no main-thread sample after the owner worker ended');
    });
  }

  it('main and workers start() at once: one starts the agent, the others join, none throws', function () {
    // a race: each run gives it one more chance to show
    for (let i = 0; i < 4; i++) {
      const r = runChild(['race', path.join(dir, String(i))]);
      assert.strictEqual(r.mainError, null, `run ${i}: ${r.mainError}`);
      const roles = [r.mainRole, ...r.workers.map((w) => w.role)];
      assert.strictEqual(roles.filter((x) => x === 'owner').length, 1, `run ${i}: ${roles}`);
      assert.strictEqual(roles.filter((x) => x === 'joined').length, roles.length - 1, `run ${i}: ${roles}`);
      assert.ok(r.workers.every((w) => w.initErrors === 0), JSON.stringify(r.workers));
    }
  });

  it('the heap warning for joined workers is logged once a process', function () {
    const r = runChild(['heapwarn', dir]);
    assert.ok(r.workers.every((t) => t.role === 'joined' && t.heapNotProfiled === 1), JSON.stringify(r.workers));
    const n = r.stderr.split('\n').filter((l) => l.includes('heap profile covers')).length;
    assert.strictEqual(n, 1, r.stderr);
  });
});
