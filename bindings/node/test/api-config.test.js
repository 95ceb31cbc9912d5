'use strict';
// Options and PYROSCOPE_* variables -> core settings (config.js alone), then the same
// errors through init() and the core's own rules (with the addon).
const assert = require('assert');
const path = require('path');
const { resolveConfig } = require('../lib/config');

const { loadNative } = require('./api-helpers');
const native = loadNative();
// config.js maps options by the core's table and resolves them with the core.
const resolve = (opts, env = {}) => resolveConfig(opts, env, native);

describe('api config: options and variables', function () {
  before(function () {
    if (!native) this.skip(); // no lib/native.js in this tree (see loadNative)
  });
  it('a missing application name is named by its option and variable (issue 28)', () => {
    const { renameError } = require('../lib/config');
    const e = renameError(new Error('application_name must be set (a non-empty string)'), {});
    assert.strictEqual(e.message, 'appName (option) or PYROSCOPE_APPLICATION_NAME ' +
      '(application_name) must be set (a non-empty string)');
    const given = renameError(new Error('application_name must be set'), { application_name: 'appName' });
    assert.strictEqual(given.message, 'appName (application_name) must be set');
  });

  it('maps the anchor options and our camelCase settings to core names', () => {
    const r = resolve({
      appName: 'shop', serverAddress: 'http://h:4040', basicAuthUser: 'u',
      basicAuthPassword: 'p', tenantID: 't1', tags: { region: 'eu', shard: 3 },
      sampleRate: 250, uploadInterval: '15s', oncpu: false, reportPid: true,
      httpHeaders: { 'X-A': 'b' }, logLevel: 'debug', stopTimeout: 2, outputDir: '/tmp/x',
    });
    const s = r.settings;
    assert.strictEqual(s.application_name, 'shop');
    assert.strictEqual(s.server_address, 'http://h:4040');
    assert.strictEqual(s.basic_auth_username, 'u');
    assert.strictEqual(s.tenant_id, 't1');
    assert.deepStrictEqual(s.tags, { region: 'eu', shard: '3' });
    assert.strictEqual(s.sample_rate, 250);
    assert.strictEqual(s.upload_interval, '15s');
    assert.strictEqual(r.core.upload_interval, '15');
    assert.strictEqual(s.oncpu, false);
    assert.strictEqual(r.kind, 'wall');
    assert.deepStrictEqual(s.http_headers, { 'X-A': 'b' });
  });

  it('keeps the anchor defaults: heap 512 KiB / depth 64, on-CPU time', () => {
    const r = resolve({ appName: 'a' });
    assert.deepStrictEqual(r.heap, { samplingIntervalBytes: 524288, stackDepth: 64, allocations: false });
    assert.strictEqual(r.wall.collectCpuTime, false);
    assert.strictEqual(r.kind, 'cpu');
    assert.strictEqual(r.settings.sample_rate, undefined);
    assert.strictEqual(r.core.sample_rate, '100'); // the core's default
  });

  it('start() profiles on-CPU time, wall time with oncpu: false or the anchor\'s wall.collectCpuTime', () => {
    assert.strictEqual(resolve({ appName: 'a' }).kind, 'cpu');
    assert.strictEqual(resolve({ appName: 'a', oncpu: false }).kind, 'wall');
    assert.strictEqual(resolve({ appName: 'a' }, { PYROSCOPE_ONCPU: 'false' }).kind, 'wall');
    assert.strictEqual(resolve({ appName: 'a', wall: { collectCpuTime: true } }).kind, 'wall');
    assert.strictEqual(resolve({ appName: 'a' }, { PYROSCOPE_WALL_COLLECT_CPU_TIME: '1' }).kind, 'wall');
    assert.strictEqual(resolve({ appName: 'a', oncpu: true, wall: { collectCpuTime: true } }).kind, 'cpu');
  });

  it('authToken becomes a Bearer Authorization header, merged with PYROSCOPE_HTTP_HEADERS', () => {
    assert.strictEqual(resolve({ appName: 'a', authToken: 'tok' }).core.http_headers,
      'Authorization=Bearer tok');
    const r = resolve({ appName: 'a' }, { PYROSCOPE_AUTH_TOKEN: 'e', PYROSCOPE_HTTP_HEADERS: 'X-K=v' });
    assert.strictEqual(r.core.http_headers, 'X-K=v,Authorization=Bearer e');
    assert.throws(() => resolve({ appName: 'a', authToken: 't', httpHeaders: { authorization: 'x' } }),
      /authToken \(auth_token\) and an Authorization header in httpHeaders \(http_headers\)/);
  });

  it('reads the anchor variables, and an option wins over its variable', () => {
    const env = {
      PYROSCOPE_FLUSH_INTERVAL_MS: '5000', PYROSCOPE_WALL_SAMPLING_INTERVAL_MICROS: '5000',
      PYROSCOPE_WALL_SAMPLING_DURATION_MS: '30000', PYROSCOPE_WALL_COLLECT_CPU_TIME: 'true',
      PYROSCOPE_HEAP_SAMPLING_INTERVAL_BYTES: '1024', PYROSCOPE_HEAP_STACK_DEPTH: '8',
      PYROSCOPE_STRIP_FILENAMES: 'dependencies', PYROSCOPE_SHORTEN_PATHS: '1',
      PYROSCOPE_APPLICATION_NAME: 'from.env', PYROSCOPE_LOG_LEVEL: 'info',
    };
    const r = resolve({}, env);
    assert.strictEqual(r.core.upload_interval, '5');
    assert.strictEqual(r.core.sample_rate, '200');
    assert.strictEqual(r.wall.samplingDurationMs, 30000);
    assert.strictEqual(r.wall.collectCpuTime, true);
    assert.deepStrictEqual(r.heap, { samplingIntervalBytes: 1024, stackDepth: 8, allocations: false });
    assert.deepStrictEqual(r.frames, { sourceMapper: undefined, stripFilenames: 'dependencies', shortenPaths: true });

    const o = resolve({
      appName: 'opt', flushIntervalMs: 2000, wall: { samplingIntervalMicros: 20000, collectCpuTime: false },
      heap: { stackDepth: 16 }, stripFilenames: 'all', shortenPaths: false,
    }, env);
    assert.strictEqual(o.core.upload_interval, '2');
    assert.strictEqual(o.core.sample_rate, '50');
    assert.strictEqual(o.wall.collectCpuTime, false);
    assert.strictEqual(o.heap.stackDepth, 16);
    assert.strictEqual(o.frames.stripFilenames, 'all');
    assert.strictEqual(o.frames.shortenPaths, false);
    assert.strictEqual(o.settings.application_name, 'opt');
  });

  it('flushIntervalMs and uploadInterval are one setting: both, with different values, are refused', () => {
    assert.throws(() => resolve({ appName: 'a', flushIntervalMs: 1000, uploadInterval: 2 }),
      /flushIntervalMs \(flush_interval_ms\) and uploadInterval \(upload_interval\) are the same setting, given as 1 and 2 s/);
    assert.strictEqual(resolve({ appName: 'a', flushIntervalMs: 1000, uploadInterval: 1 }).core.upload_interval, '1');
    assert.throws(() => resolve({ appName: 'a' }, { PYROSCOPE_FLUSH_INTERVAL_MS: '1000', PYROSCOPE_UPLOAD_INTERVAL: '2' }),
      /PYROSCOPE_UPLOAD_INTERVAL and PYROSCOPE_FLUSH_INTERVAL_MS/);
    // an option beats the other spelling's variable
    assert.strictEqual(resolve({ appName: 'a', uploadInterval: 3 }, { PYROSCOPE_FLUSH_INTERVAL_MS: '1000' }).core.upload_interval, '3');
    assert.strictEqual(resolve({ appName: 'a', flushIntervalMs: 3000 }, { PYROSCOPE_UPLOAD_INTERVAL: '1' }).core.upload_interval, '3');
  });

  it('memory / memoryInterval are the heap profile\'s settings (issue 26): one interval, two names', () => {
    const d = resolve({ appName: 'a' });
    assert.strictEqual(d.memory, true); // start() runs the heap profile, as the anchor's did
    assert.strictEqual(resolve({ appName: 'a', memory: false }).memory, false);
    assert.strictEqual(resolve({ appName: 'a' }, { PYROSCOPE_MEMORY: 'off' }).memory, false);
    assert.strictEqual(resolve({ appName: 'a', memory: true }, { PYROSCOPE_MEMORY: 'off' }).memory, true);
    const m = resolve({ appName: 'a', memoryInterval: 4096 });
    assert.strictEqual(m.heap.samplingIntervalBytes, 4096);
    assert.strictEqual(m.core.memory_interval, '4096');
    assert.strictEqual(resolve({ appName: 'a' }, { PYROSCOPE_MEMORY_INTERVAL: '8192' }).heap.samplingIntervalBytes, 8192);
    // the anchor's spelling sets the same setting; an option beats either variable
    const h = resolve({ appName: 'a', heap: { samplingIntervalBytes: 2048 } }, { PYROSCOPE_MEMORY_INTERVAL: '8192' });
    assert.strictEqual(h.heap.samplingIntervalBytes, 2048);
    assert.strictEqual(h.core.memory_interval, '2048');
    assert.strictEqual(resolve({ appName: 'a', memoryInterval: 2048, heap: { samplingIntervalBytes: 2048 } })
      .heap.samplingIntervalBytes, 2048);
    assert.throws(() => resolve({ appName: 'a', memoryInterval: 4096, heap: { samplingIntervalBytes: 2048 } }),
      /memoryInterval \(memory_interval\) and heap.samplingIntervalBytes \(heap_sampling_interval_bytes\) are the same setting, given as 4096 and 2048 bytes/);
    assert.throws(() => resolve({ appName: 'a' }, { PYROSCOPE_MEMORY_INTERVAL: '4096',
      PYROSCOPE_HEAP_SAMPLING_INTERVAL_BYTES: '2048' }), /are the same setting/);
    // V8 keeps no table of live samples of ours: memory_max_live does nothing here
    assert.ok(resolve({ appName: 'a', memoryMaxLive: 100 }).warnings
      .some((w) => /memoryMaxLive has no effect in Node.js/.test(w)));
  });

  it('sampleRate and wall.samplingIntervalMicros must agree when both are given', () => {
    assert.strictEqual(resolve({ appName: 'a', sampleRate: 100, wall: { samplingIntervalMicros: 10000 } }).core.sample_rate, '100');
    assert.throws(() => resolve({ appName: 'a', sampleRate: 99, wall: { samplingIntervalMicros: 10000 } }),
      /sampleRate \(sample_rate\) and wall.samplingIntervalMicros \(wall_sampling_interval_micros\) are the same setting, given as 99 and 100 Hz/);
    // out of range: the nearest bound, with a warning (api-anchor-inputs.test.js)
    assert.strictEqual(resolve({ appName: 'a', wall: { samplingIntervalMicros: 60 } }).core.sample_rate, '10000');
  });

  const bad = [
    [{ appName: 5 }, /appName \(application_name\) must be a string, not number 5/],
    [{ appName: 'a', applicationName: 'b' }, /appName and applicationName are the same setting/],
    [{ appName: 'a', tags: { k: {} } }, /tags must be an object of string values, not an object whose "k" is object/],
    [{ appName: 'a', tags: 'k=v' }, /tags must be an object/],
    [{ appName: 'a', httpHeaders: { k: 1 } }, /httpHeaders \(http_headers\) must be an object of string values, not an object whose "k" is number$/],
    [{ appName: 'a', sampleRate: '100' }, /sampleRate \(sample_rate\) must be a finite number, not "100"/],
    [{ appName: 'a', sampleRate: NaN }, /sampleRate \(sample_rate\) must be a finite number/],
    [{ appName: 'a', oncpu: 'yes' }, /oncpu must be a boolean/],
    [{ appName: 'a', flushIntervalMs: 1.5 }, /flushIntervalMs \(flush_interval_ms\) must be a whole number/],
    [{ appName: 'a', wall: 3 }, /wall must be an object/],
    [{ appName: 'a', wall: { collectCpuTime: 1 } }, /wall.collectCpuTime \(wall_collect_cpu_time\) must be a boolean/],
    [{ appName: 'a', stripFilenames: 'some' }, /stripFilenames \(strip_filenames\): "some" is not one of all,dependencies/],
    [{ appName: 'a', shortenPaths: 'true' }, /shortenPaths \(shorten_paths\) must be a boolean/],
    [{ appName: 'a', sourceMapper: {} }, /sourceMapper must be a SourceMapper/],
    [{ appName: 'a', maxDepth: 2.5 }, /maxDepth \(max_depth\) must be a whole number/],
  ];
  for (const [opts, re] of bad) {
    it(`refuses ${JSON.stringify(opts, (k, v) => (Number.isNaN(v) ? 'NaN' : v))}`, () => {
      assert.throws(() => resolve(opts), (e) => re.test(e.message) && e.code === 'ERR_PYROSCOPE_CONFIG');
    });
  }

  // The core checks each value's type (pn_config_set_arg) in Node's words, showing it as
  // Node does; a wrong type is a TypeError, a value no type can fix an Error (issue 27).
  const wrongType = [
    [{ appName: null }, /^appName \(application_name\) must be a string, not null$/],
    [{ appName: ['x'] }, /^appName \(application_name\) must be a string, not an array$/],
    [{ appName: Symbol('s') }, /must be a string, not symbol$/],
    [{ appName: { toString() { throw new Error('no'); } } }, /must be a string, not object$/],
    [{ appName: 'a', sampleRate: 10n }, /^sampleRate \(sample_rate\) must be a finite number, not bigint 10$/],
    [{ appName: 'a', sampleRate: 'a"\n' }, /must be a finite number, not "a\\"\\n"$/],
    [{ appName: 'a', sampleRate: 'é'.repeat(500) }, /not "é{50,}\.\.\."$/],
    [{ appName: 'a', logLevel: true }, /^logLevel \(log_level\) must be a level name \(debug,.*\) or a number, not boolean true$/],
    [{ appName: 'a', tags: { x: NaN } }, /^tags must be an object of string values, not an object whose "x" is number NaN$/],
    // a secret setting's value is never shown (PN_SETTING_SECRET): its type alone
    [{ appName: 'a', basicAuthUser: 'u', basicAuthPassword: new String('hunter2') },
      /^basicAuthPassword \(basic_auth_password\) must be a string, not object$/],
    [{ appName: 'a', authToken: { toString: () => 'tok-123' } }, /^authToken \(auth_token\) must be a string, not object$/],
    [{ appName: 'a', httpHeaders: 'Authorization: Bearer abc' }, /^httpHeaders \(http_headers\) must be an object of string values, not string$/],
    [{ appName: 'a', httpHeaders: { Authorization: new String('Bearer abc') } }, /not an object whose "Authorization" is object$/],
  ];
  for (const [opts, re] of wrongType) {
    it(`a TypeError: ${re.source.slice(0, 60)}`, () => {
      assert.throws(() => resolve(opts), (e) => e instanceof TypeError && re.test(e.message) &&
        e.message.length < 300 && e.code === 'ERR_PYROSCOPE_CONFIG');
    });
  }
  it('a NUL, or a number that is not finite, is an Error; a whole float is an integer', () => {
    for (const [opts, re] of [[{ appName: 'a\0b' }, /^appName \(application_name\) must not contain a NUL byte$/],
      [{ appName: 'a', tags: { k: 'v\0' } }, /^tags must not contain a NUL byte$/],
      [{ appName: 'a', sampleRate: Infinity }, /^sampleRate \(sample_rate\) must be a finite number, not number Infinity$/]]) {
      assert.throws(() => resolve(opts), (e) => !(e instanceof TypeError) && re.test(e.message) &&
        e.code === 'ERR_PYROSCOPE_CONFIG');
    }
    assert.strictEqual(resolve({ appName: 'a', maxDepth: 64.0, logLevel: 40 }).core.max_depth, '64');
    // a whole number beyond 2^63 is one still (Number.isInteger): out of range, not a
    // TypeError "must be a whole number" / "or a number" (it was)
    assert.throws(() => resolve({ appName: 'a', logLevel: 1e300 }), (e) => !(e instanceof TypeError) &&
      /^logLevel \(log_level\): "9223372036854775807" is not one of/.test(e.message));
    assert.strictEqual(resolve({ appName: 'a', maxDepth: 1e300 }).core.max_depth,
      resolve({ appName: 'a', maxDepth: 1e18 }).core.max_depth);
  });

  // The anchor's own variables, malformed, start (api-anchor-inputs.test.js); two
  // variables for one setting do not.
  const badEnv = [
    [{ PYROSCOPE_FLUSH_INTERVAL_MS: '1000', PYROSCOPE_UPLOAD_INTERVAL: '2' }, /are the same setting/],
  ];
  for (const [env, re] of badEnv) {
    it(`refuses ${JSON.stringify(env)}`, () => {
      assert.throws(() => resolve({ appName: 'a' }, env), re);
    });
  }
});

describe('api config: through init() and the core', function () {
  before(function () {
    if (!native) this.skip(); // no lib/native.js in this tree (see loadNative)
  });
  const api = require('../lib');
  const saved = { ...process.env };
  afterEach(() => {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
  });

  const coreBad = [
    [{ appName: 'a', uploadInterval: '2h' }, /^uploadInterval \(upload_interval\)/],
    [{ appName: 'a', serverAddress: 'local host:4040' }, /^serverAddress \(server_address\).*with http:\/\/ in front/],
    [{ appName: 'a', tags: { __x: 'v' } }, /tags.*reserved/],
    [{ appName: 'a', tags: { k: 'a,b' } }, /tags.*not allowed/],
    [{ appName: 'a{b}' }, /appName \(application_name\)/],
    [{ appName: 'a', logLevel: 'loud' }, /^logLevel \(log_level\)/],
  ];
  for (const [opts, re] of coreBad) {
    it(`init(${JSON.stringify(opts)}) throws naming the option`, () => {
      assert.throws(() => api.init(opts), (e) => re.test(e.message) && e.code === 'ERR_PYROSCOPE_CONFIG');
    });
  }

  it('a bad core variable is named', () => {
    process.env.PYROSCOPE_SAMPLE_RATE = 'fast';
    assert.throws(() => api.init({ appName: 'a' }), /PYROSCOPE_SAMPLE_RATE/);
    api.init({ appName: 'a', sampleRate: 100 }); // the option wins: the variable is not read
  });

  it('PYROSCOPE_BASIC_AUTH_USER (Grafana\'s name) is the user; PASSWORD alone no longer fails (issue 28)', () => {
    process.env.PYROSCOPE_BASIC_AUTH_USER = 'alice';
    process.env.PYROSCOPE_BASIC_AUTH_PASSWORD = 'pw';
    assert.strictEqual(resolve({ appName: 'a' }, process.env).core.basic_auth_username, 'alice');
    api.init({ appName: 'a' }); // the core reads it: no "password without user" error
    assert.strictEqual(resolve({ appName: 'a', basicAuthUser: 'bob' }, process.env).core.basic_auth_username, 'bob');
  });

  it('init() without a name starts (unknown_service, issue 28 §2: api-anchor-inputs.test.js)', () => {
    delete process.env.PYROSCOPE_APPLICATION_NAME;
    api.init({});
  });
});
