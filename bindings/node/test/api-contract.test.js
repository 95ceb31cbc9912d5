'use strict';
// Issue 27: one contract in the core. Walks the core's settings table (the addon's
// settingTable()) with the cases every binding shares (tests/contract/settings_cases.json):
// each setting by option and by variable, the precedence rule, a bad value naming the
// setting, and the drift items settled the same way in all three suites.
const assert = require('assert');
const path = require('path');
const { resolveConfig } = require('../lib/config');
const { loadNative } = require('./api-helpers');
const CASES = require(path.join(__dirname, '..', '..', '..', 'tests', 'contract', 'settings_cases.json'));

const native = loadNative();
const TABLE = native ? native.settingTable() : [];
// (other spellings, aliasOf, are walked in api-config.test.js)
const ROWS = TABLE.filter((r) => r.node && !r.external && !r.aliasOf);

// The settings start() would run with, {core name: string form}; errors renamed as init() does.
const resolved = (options, env = {}) => resolveConfig(options, env, native).core;
const caseOf = (row) => CASES.by_name[row.name] || CASES.by_kind[row.kind];
const optionOf = (row) => row.node.split('|')[0];
function optionValue(row, text) {
  if (row.kind === 'bool') return ['true', '1', 'yes', 'on'].includes(text);
  if (row.kind === 'number' || row.kind === 'integer') return Number(text);
  if (row.kind === 'pairs') return Object.fromEntries(text.split(',').map((p) => p.split('=')));
  return text;
}
function base(row) {
  const o = row.name === 'application_name' ? {} : { appName: 'app' };
  for (const [name, v] of Object.entries(CASES.need[row.name] || {})) {
    o[optionOf(TABLE.find((r) => r.name === name))] = v;
  }
  return o;
}

describe('api contract: the core\'s settings table (issue 27)', function () {
  before(function () {
    if (!native) this.skip(); // no lib/native.js in this tree (see loadNative)
  });

  it('every setting with a Node keyword, by option and by variable', () => {
    assert.ok(ROWS.length > 15);
    for (const row of ROWS) {
      const [text, want] = caseOf(row);
      assert.strictEqual(resolved({ ...base(row), [optionOf(row)]: optionValue(row, text) })[row.name], want, row.name);
      assert.strictEqual(resolved(base(row), { [row.env]: text })[row.name], want, row.env);
    }
  });

  it('option > PYROSCOPE_* > OTEL_* > default', () => {
    for (const row of ROWS) {
      const [text, want] = caseOf(row);
      const bad = { [row.env]: CASES.bad_variable[row.kind] };
      assert.strictEqual(resolved({ ...base(row), [optionOf(row)]: optionValue(row, text) }, bad)[row.name], want,
        `${row.name}: a bad variable beside its option is not read`);
      // report_thread_name: Node's own default is true (main and worker threads); memory
      // too (start() runs the heap profile, as @pyroscope/nodejs's did)
      if (row.default && !['server_address', 'report_thread_name', 'memory'].includes(row.name)) {
        assert.strictEqual(resolved(base(row))[row.name], row.default, `${row.name} default`);
      }
      for (const otel of (row.otelEnv || '').split(',').filter(Boolean)) {
        const other = CASES.otel_value[row.name];
        assert.strictEqual(resolved(base(row), { [otel]: other })[row.name], other, otel);
        assert.strictEqual(resolved(base(row), { [otel]: other, [row.env]: text })[row.name], want, otel);
      }
    }
  });

  it('a bad value names the setting (option and variable)', () => {
    for (const row of ROWS) {
      const bad = CASES.bad_variable[row.kind];
      assert.throws(() => resolved(base(row), { [row.env]: bad }),
        (e) => e.message.includes(`environment variable ${row.env}`) && e.message.includes(row.name), row.env);
      const value = { number: CASES.bad_keyword_number, integer: CASES.bad_keyword_number, bool: 'maybe', pairs: 'k' }[row.kind];
      assert.throws(() => resolved({ ...base(row), [optionOf(row)]: value === undefined ? bad : value }),
        (e) => e.message.includes(optionOf(row)) && e.code === 'ERR_PYROSCOPE_CONFIG', optionOf(row));
    }
  });

  // --- the drift items, settled the same way in all three suites
  it('defaults are the core\'s (log level warning, 100 Hz, 10 s, localhost:4040)', () => {
    const got = resolved({ appName: 'app' });
    for (const [name, want] of Object.entries(CASES.defaults)) assert.strictEqual(got[name], want, name);
    assert.strictEqual(got.spy_name, 'nodespy');
  });

  it('variables alone: the other spellings, a token beside basic auth, a full name beside its alias', () => {
    for (const [env, want] of CASES.env_cases) {
      const got = resolved({ appName: 'app' }, env);
      for (const [name, value] of Object.entries(want)) assert.strictEqual(got[name], value, `${JSON.stringify(env)} ${name}`);
    }
    for (const env of CASES.env_refused) assert.throws(() => resolved({ appName: 'app' }, env), /are the same setting/);
  });

  it('an OTLP endpoint alone means no default server', () => {
    for (const v of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT']) {
      const got = resolved({ appName: 'app' }, { [v]: 'http://collector:4318' });
      assert.deepStrictEqual([got.server_address, got.otlp_endpoint], ['', 'http://collector:4318'], v);
    }
  });

  it('PYROSCOPE_SPY_NAME is honoured', () => {
    assert.strictEqual(resolved({ appName: 'app' }, { PYROSCOPE_SPY_NAME: 'custom' }).spy_name, 'custom');
  });

  it('PYROSCOPE_ADHOC_SERVER_ADDRESS is below the option', () => {
    const env = { PYROSCOPE_ADHOC_SERVER_ADDRESS: 'http://adhoc:1' };
    assert.strictEqual(resolved({ appName: 'app' }, env).server_address, 'http://adhoc:1');
    assert.strictEqual(resolved({ appName: 'app', serverAddress: 'http://kw:1' }, env).server_address, 'http://kw:1');
  });

  it('durations take units', () => {
    const got = resolved({ appName: 'app', uploadInterval: '1m', stopTimeout: '500ms' });
    assert.deepStrictEqual([got.upload_interval, got.stop_timeout], ['60', '0.5']);
  });

  it('settings of other runtimes (faultGuard, samplerCpuBudget) warn and are ignored', () => {
    // reportThreadName is Node's too since workers are profiled (on by default)
    const r = resolveConfig({ appName: 'app', faultGuard: false, samplerCpuBudget: 5, reportThreadName: true }, {}, native);
    assert.deepStrictEqual(r.warnings.map((w) => w.split(' ')[1]).sort(), ['faultGuard', 'samplerCpuBudget']);
    assert.strictEqual(r.settings.report_thread_name, true);
    assert.ok(!('fault_guard' in r.settings));
  });

  it('an unknown PYROSCOPE_* variable is warned about once per process', async () => {
    const api = require('../lib');
    const name = `PYROSCOPE_NO_SUCH_${process.pid}_${Date.now()}`;
    const seen = [];
    const rec = (...args) => seen.push(args.join(' '));
    api.setLogger({ debug() {}, info() {}, warn: rec, error: rec, trace() {}, fatal() {} });
    process.env[name] = '1';
    try {
      api.init({ appName: 'app', outputDir: '/tmp' });
      api.init({ appName: 'app', outputDir: '/tmp' });
      for (const end = Date.now() + 5000; !seen.some((s) => s.includes(name)) && Date.now() < end;) {
        await new Promise((r) => setTimeout(r, 20));
      }
      await new Promise((r) => setTimeout(r, 200));
      assert.strictEqual(seen.filter((s) => s.includes(name)).length, 1, JSON.stringify(seen));
    } finally {
      delete process.env[name];
      api.setLogger(null);
    }
  });

  it('stats() has every counter of the core\'s table, in camelCase', () => {
    const table = native.statsTable();
    assert.ok(table.length > 15);
    const camel = (n) => n.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
    const got = native.stats();
    const missing = table.map(([n]) => camel(n)).filter((n) => !(n in got));
    assert.deepStrictEqual(missing, []);
  });
});
