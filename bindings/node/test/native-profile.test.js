'use strict';
// CPU, wall and heap profiles: values, join counters, sample types, exit.
const assert = require('assert');
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const native = require('../lib/native');
const { tmpdir, rmdir, profiles, samples, total, count, has, sleep, spin } = require('./native_helpers');

function cpuBurner(ms) { return spin(ms); }
function allocRetained(n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push({ i, s: 'item-' + i, a: [i, i + 1] });
  return out;
}

describe('native: profiles', function () {
  this.timeout(60000);
  afterEach(async function () {
    if (native.running()) await native.stop();
  });

  it('a cpu sample is worth the thread CPU since the last one; wall counts time', async function () {
    const dir = tmpdir('cpu');
    try {
      native.start({ application_name: 'cpu', output_dir: dir, sample_rate: 200 }, {});
      native.startProfiler('cpu', {});
      native.startProfiler('wall', { collectCpuTime: true });
      const u0 = process.cpuUsage();
      const t0 = process.hrtime.bigint();
      cpuBurner(300);
      await sleep(300); // idle: wall time, no CPU
      cpuBurner(300);
      const wallNs = Number(process.hrtime.bigint() - t0);
      const u = process.cpuUsage(u0);
      const cpuNs = (u.user + u.system) * 1000;
      const st = await native.stop();

      const cpu = samples(profiles(dir, 'cpu'));
      const wall = samples(profiles(dir, 'wall'));
      assert.deepStrictEqual(cpu[0].types, ['cpu', 'samples']);
      assert.deepStrictEqual(wall[0].types, ['wall', 'samples', 'cpu']);
      const cpuTotal = total(cpu, 0);
      const burnCpu = total(cpu, 0, (s) => has(s, 'cpuBurner'));
      const wallTotal = total(wall, 0);
      // CPU profile: the main thread's CPU. process.cpuUsage counts every
      // thread (the core's, V8's sampler), so it is an upper bound.
      assert.ok(cpuTotal <= cpuNs * 1.1 + 20e6, `cpu profile ${cpuTotal} vs process CPU ${cpuNs}`);
      assert.ok(burnCpu >= 0.4 * cpuNs, `burner CPU ${burnCpu} vs process CPU ${cpuNs}`);
      // The wall profile also covers the idle 300 ms; the CPU profile does not.
      assert.ok(cpuTotal < 0.9 * wallTotal, `cpu ${cpuTotal} wall ${wallTotal}`);
      assert.ok(wallTotal <= wallNs * 1.2, `wall profile ${wallTotal} vs elapsed ${wallNs}`);
      // The wall profile's cpu value (collectCpuTime) agrees with the CPU profile.
      const wallCpu = total(wall, 2);
      assert.ok(wallCpu >= 0.8 * cpuTotal && wallCpu <= 1.25 * cpuTotal + 5e6, `${wallCpu} vs ${cpuTotal}`);
      // Join counters: nearly every V8 sample met its bracket.
      const j = st.join;
      assert.ok(j.joined >= 20, JSON.stringify(j));
      assert.ok(j.unjoined <= 0.05 * j.joined + 2, JSON.stringify(j));
      assert.strictEqual(j.bracketsDropped, 0);
      assert.strictEqual(st.lateSamples, 0, JSON.stringify(st));
      assert.ok(count(wall) >= j.joined * 0.9, `${count(wall)} wall samples, ${j.joined} joined`);
    } finally {
      rmdir(dir);
    }
  });

  it('mapFrame renames frames, once per distinct frame', async function () {
    const dir = tmpdir('map');
    try {
      native.start({ application_name: 'map', output_dir: dir, sample_rate: 200 }, {});
      let calls = 0;
      const seen = new Set();
      native.startProfiler('cpu', {
        mapFrame(f) {
          calls++;
          seen.add(f.name + '@' + f.file + ':' + f.line + ':' + f.column);
          return f.name === 'cpuBurner' ? { name: 'mappedBurner', file: 'src/burner.ts', line: 7 } : null;
        },
      });
      cpuBurner(200);
      await native.stop();
      const cpu = samples(profiles(dir, 'cpu'));
      assert.ok(count(cpu, (s) => has(s, 'mappedBurner')) >= 3);
      assert.strictEqual(count(cpu, (s) => has(s, 'cpuBurner')), 0);
      assert.strictEqual(calls, seen.size, `${calls} calls, ${seen.size} distinct frames`);
    } finally {
      rmdir(dir);
    }
  });

  it('our SIGPROF handler stays in front of V8\'s across profiler restarts', async function () {
    const addon = require('../lib/addon');
    const dir = tmpdir('chain');
    try {
      native.start({ application_name: 'chain', output_dir: dir, sample_rate: 200 }, {});
      for (let round = 0; round < 3; round++) {
        const before = native.stats().join;
        native.startProfiler('cpu', {});
        // in front already: arming again does not install (nor chain to itself)
        assert.strictEqual(addon.signalArm(0), 0);
        native.labels.run({ round: String(round) }, cpuBurner, 150);
        await native.stopProfiler('cpu');
        const after = native.stats().join;
        const joined = after.joined - before.joined;
        const unjoined = after.unjoined - before.unjoined;
        assert.ok(joined >= 5 && unjoined <= 0.1 * joined + 1, `round ${round}: ${JSON.stringify(after)}`);
      }
      await native.stop();
      const cpu = samples(profiles(dir, 'cpu'));
      for (const r of ['0', '1', '2']) {
        assert.ok(count(cpu, (s) => has(s, 'cpuBurner') && s.labels.round === r) >= 3, r);
      }
    } finally {
      rmdir(dir);
    }
  });

  it('heap profiles hold the live sampled allocations by stack', async function () {
    const dir = tmpdir('heap');
    try {
      native.start({ application_name: 'heap', output_dir: dir }, {});
      native.startProfiler('heap', { samplingIntervalBytes: 16384 });
      await sleep(5);
      globalThis.__pnKeep = allocRetained(200000);
      await sleep(5);
      globalThis.__pnKeep2 = allocRetained(100000);
      assert.strictEqual(await native.flush(20), true);
      await native.stopProfiler('heap');
      await native.stop();
      const list = samples(profiles(dir, 'heap'));
      assert.ok(list.length > 0);
      assert.deepStrictEqual(list[0].types, ['inuse_objects', 'inuse_space']);
      const mine = total(list, 1, (s) => has(s, 'allocRetained'));
      // 300 000 objects of > 40 bytes are alive: most of their bytes show.
      assert.ok(mine >= 4e6, `allocRetained in-use bytes ${mine}`);
      assert.ok(total(list, 0, (s) => has(s, 'allocRetained')) > 10);
    } finally {
      delete globalThis.__pnKeep;
      delete globalThis.__pnKeep2;
      rmdir(dir);
    }
  });

  it('process.exit() during stop() waits for the stop\'s last upload', async function () {
    // The server answers only after the client's process would have ended
    // had the exit not waited: the connection must still be open then.
    const http = require('http');
    const { spawn } = require('child_process');
    const seen = [];
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const entry = { url: req.url, closedEarly: false, answered: false };
        seen.push(entry);
        req.socket.once('close', () => { if (!entry.answered) entry.closedEarly = true; });
        setTimeout(() => {
          if (entry.closedEarly) return;
          entry.answered = true;
          res.writeHead(200);
          res.end();
        }, 1500);
      });
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    try {
      const lib = path.join(__dirname, '..', 'lib', 'native.js');
      const child = spawn(process.execPath, ['-e', `
        const native = require(${JSON.stringify(lib)});
        native.start({ application_name: 'exiting2', upload_interval: 3600, stop_timeout: 30,
                       server_address: 'http://127.0.0.1:${server.address().port}' }, {});
        native.startProfiler('wall', {});
        function exitBurner2() { const s = process.cpuUsage(); let x = 0; for (;;) { for (let i = 0; i < 1e4; i++) x++; const u = process.cpuUsage(s); if (u.user + u.system > 200000) return x; } }
        exitBurner2();
        native.stop();
        process.exit(0);
      `], { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d) => { stderr += d; });
      const code = await new Promise((r) => child.on('exit', r));
      assert.strictEqual(code, 0, stderr);
      assert.ok(seen.length >= 1, stderr);
      assert.ok(seen.every((e) => e.answered && !e.closedEarly), JSON.stringify(seen));
      assert.match(seen[0].url, /name=exiting2/);
    } finally {
      server.close();
    }
  });

  it('a program that never calls stop() exits and exports its last period', function () {
    const dir = tmpdir('exit');
    try {
      const lib = path.join(__dirname, '..', 'lib', 'native.js');
      const r = spawnSync(process.execPath, ['-e', `
        const native = require(${JSON.stringify(lib)});
        native.start({ application_name: 'exiting', output_dir: ${JSON.stringify(dir)},
                       upload_interval: 3600 }, {});
        native.startProfiler('cpu', {});
        native.startProfiler('wall', {});
        native.startProfiler('heap', {});
        function exitBurner() { const s = process.cpuUsage(); let x = 0; for (;;) { for (let i = 0; i < 1e4; i++) x++; const u = process.cpuUsage(s); if (u.user + u.system > 300000) return x; } }
        native.labels.run({ phase: 'end' }, exitBurner);
      `], { encoding: 'utf8', timeout: 50000 });
      assert.strictEqual(r.status, 0, r.stderr);
      const wall = samples(profiles(dir, 'wall'));
      assert.ok(count(wall, (s) => has(s, 'exitBurner') && s.labels.phase === 'end') >= 3,
        fs.readdirSync(dir).join() + r.stderr);
    } finally {
      rmdir(dir);
    }
  });
});
