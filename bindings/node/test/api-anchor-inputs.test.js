'use strict';
// Issue 28 §2: what @pyroscope/nodejs 0.6.4 accepted at init() still starts, with the
// anchor's meaning (coerced, or defaulted with a warning naming the option); what cannot
// work at all is still an init() error naming it. One row per input, each citing the
// anchor's source (dist/cjs of the 0.6.4 package) that accepted it.
const assert = require('assert');
const { resolveConfig } = require('../lib/config');
const { loadNative } = require('./api-helpers');

const native = loadNative();

// resolveConfig(options, env) and the warnings it gave: its own (r.warnings) and the
// core's (logged, once per process per input), waited for when one is expected.
async function resolveWatching(options, env, warning) {
  const seen = [];
  native.setLogHandler((level, message) => seen.push(message));
  try {
    const r = resolveConfig(options, env, native);
    const all = () => r.warnings.concat(seen);
    for (const end = Date.now() + 5000; warning && !all().some((w) => warning.test(w)) && Date.now() < end;) {
      await new Promise((res) => setTimeout(res, 20));
    }
    return { r, warnings: all() };
  } finally {
    native.setLogHandler(null);
  }
}

// [what, options, env, {core name: string form after resolving}, warning (RegExp) or null]
const STARTS = [
  // utils/check-pyroscope-config.js: appName may be undefined; profilers/pyroscope-profiler.js:
  // appName ?? '' (the server calls such a series unknown_service).
  ['no appName', {}, {}, { application_name: 'unknown_service' }, null],
  ['appName \'\'', { appName: '' }, {}, { application_name: 'unknown_service' }, null],
  // check-pyroscope-config.js checks its own keys only; others are never read.
  ['unknown keys', { appName: 'a', sourceMapPath: ['.'], labels: {}, sourceMap: true }, {},
    { application_name: 'a' }, /unknown option "sourceMapPath" is ignored/],
  ['unknown wall/heap keys', { appName: 'a', wall: { interval: 1 }, heap: { depth: 1 } }, {},
    { application_name: 'a' }, /unknown option "wall.interval" is ignored/],
  // hasValidServerAddress: any string; pyroscope-api-exporter.js new URL(`${serverAddress}/ingest`).
  ['serverAddress without a scheme', { appName: 'a', serverAddress: 'pyroscope:4040' }, {},
    { server_address: 'http://pyroscope:4040' }, null],
  // hasValidFlushInterval: any whole number; continuous-profiler.js setTimeout(.., flushIntervalMs).
  ['flushIntervalMs 0', { appName: 'a', flushIntervalMs: 0 }, {}, { upload_interval: '10' },
    /flush_interval_ms: 0 is out of range.*it is ignored/],
  ['flushIntervalMs -1', { appName: 'a', flushIntervalMs: -1 }, {}, { upload_interval: '10' },
    /flush_interval_ms: -1 is out of range/],
  // validateTags: isObject (arrays are objects); pyroscope-profiler.js Object.entries(tags).
  ['tags as an array of pairs', { appName: 'a', tags: [['region', 'eu'], 'shard=3'] }, {},
    { tags: 'region=eu,shard=3' }, null],
  ['tags as an array of words', { appName: 'a', tags: ['eu'] }, {}, { tags: '' },
    /the entry "eu" is neither \[key, value\] nor "key=value"/],
  // process-config.js copies tenantID unchecked; buildRequestHeaders headers.set(.., tenantID).
  ['tenantID: 5', { appName: 'a', tenantID: 5 }, {}, { tenant_id: '5' }, null],
  // buildRequestHeaders: the token if set, else basic auth.
  ['authToken with basic auth', { appName: 'a', authToken: 't', basicAuthUser: 'u', basicAuthPassword: 'p' }, {},
    { http_headers: 'Authorization=Bearer t', basic_auth_username: '', basic_auth_password: '' },
    /the token is sent and basic auth is not/],
  ['PYROSCOPE_AUTH_TOKEN with PYROSCOPE_BASIC_AUTH_USER', { appName: 'a' },
    { PYROSCOPE_AUTH_TOKEN: 't', PYROSCOPE_BASIC_AUTH_USER: 'u', PYROSCOPE_BASIC_AUTH_PASSWORD: 'p' },
    { http_headers: 'Authorization=Bearer t', basic_auth_username: '' }, /the token is sent/],
  // utils/get-env.js: parseNumericEnv (Number()), parseBooleanEnv (=== 'true' || '1'),
  // parseStripFilenamesEnv (else undefined): never an error.
  ['PYROSCOPE_FLUSH_INTERVAL_MS=soon', { appName: 'a' }, { PYROSCOPE_FLUSH_INTERVAL_MS: 'soon' },
    { upload_interval: '10' }, /PYROSCOPE_FLUSH_INTERVAL_MS: flush_interval_ms: "soon" is not a whole number.*it is ignored/],
  ['PYROSCOPE_FLUSH_INTERVAL_MS=0', { appName: 'a' }, { PYROSCOPE_FLUSH_INTERVAL_MS: '0' },
    { upload_interval: '10' }, /PYROSCOPE_FLUSH_INTERVAL_MS: flush_interval_ms: 0 is out of range.*it is ignored/],
  ['PYROSCOPE_HEAP_STACK_DEPTH=1.5', { appName: 'a' }, { PYROSCOPE_HEAP_STACK_DEPTH: '1.5' }, {},
    /PYROSCOPE_HEAP_STACK_DEPTH: heap_stack_depth: 1.5 is not a whole number.*it is ignored/],
  ['PYROSCOPE_WALL_COLLECT_CPU_TIME=maybe', { appName: 'a' }, { PYROSCOPE_WALL_COLLECT_CPU_TIME: 'maybe' }, {},
    /PYROSCOPE_WALL_COLLECT_CPU_TIME.*"maybe" is not a boolean.*ignored/],
  ['PYROSCOPE_STRIP_FILENAMES=none', { appName: 'a' }, { PYROSCOPE_STRIP_FILENAMES: 'none' }, {},
    /PYROSCOPE_STRIP_FILENAMES: strip_filenames: "none" is not one of all,dependencies.*ignored/],
  // Numbers out of our range, which the anchor took unchecked: the nearest bound, with a
  // warning naming the setting (the core's, through the log).
  ['PYROSCOPE_WALL_SAMPLING_INTERVAL_MICROS=1', { appName: 'a' }, { PYROSCOPE_WALL_SAMPLING_INTERVAL_MICROS: '1' },
    { sample_rate: '10000' }, /wall_sampling_interval_micros: 1 us is out of range.*using 100 us$/],
  ['wall.samplingIntervalMicros 50', { appName: 'a', wall: { samplingIntervalMicros: 50 } }, {},
    { sample_rate: '10000' }, /wall_sampling_interval_micros: 50 us is out of range.*using 100 us$/],
  ['wall.samplingIntervalMicros 1e9', { appName: 'a', wall: { samplingIntervalMicros: 1e9 } }, {},
    { sample_rate: '0.1' }, /wall_sampling_interval_micros: 1000000000 us is out of range.*using 10000000 us$/],
  ['flushIntervalMs 10', { appName: 'a', flushIntervalMs: 10 }, {}, { upload_interval: '0.05' }, null],
  ['PYROSCOPE_FLUSH_INTERVAL_MS=10', { appName: 'a' }, { PYROSCOPE_FLUSH_INTERVAL_MS: '10' },
    { upload_interval: '0.05' }, null],
  ['flushIntervalMs 2 hours', { appName: 'a', flushIntervalMs: 7200000 }, {}, { upload_interval: '3600' }, null],
  ['sampleRate 0', { appName: 'a', sampleRate: 0 }, {}, { sample_rate: '100' },
    /sample_rate: 0 is not positive; using the default, 100 Hz$/],
  ['heap.samplingIntervalBytes 2**29', { appName: 'a', heap: { samplingIntervalBytes: 2 ** 29 } }, {},
    { memory_interval: '268435456' }, /heap_sampling_interval_bytes: 536870912 bytes is out of range/],
  ['PYROSCOPE_SHORTEN_PATHS=yes please', { appName: 'a' }, { PYROSCOPE_SHORTEN_PATHS: 'yes please' }, {},
    /PYROSCOPE_SHORTEN_PATHS.*ignored/],
];

// Inputs that cannot work at all: still an error naming the option.
const REFUSED = [
  ['an address that is none even with http://', { appName: 'a', serverAddress: 'py roscope:4040' },
    /^serverAddress \(server_address\).*with http:\/\/ in front/],
  ['an address of another scheme', { appName: 'a', serverAddress: 'ftp://h' }, /^serverAddress \(server_address\)/],
  ['a non-integer flushIntervalMs (the anchor refused it too)', { appName: 'a', flushIntervalMs: 1.5 },
    /flushIntervalMs \(flush_interval_ms\) must be a whole number/],
  ['a sampleRate that is no number', { appName: 'a', sampleRate: 'fast' }, /sampleRate/],
];

describe('api config: what @pyroscope/nodejs took at start-up starts (issue 28 §2)', function () {
  before(function () {
    if (!native) this.skip(); // no lib/native.js in this tree (see loadNative)
  });

  for (const [what, options, env, want, warning] of STARTS) {
    it(`starts: ${what}`, async () => {
      const { r, warnings } = await resolveWatching(options, env, warning);
      for (const [name, value] of Object.entries(want)) assert.strictEqual(r.core[name], value, name);
      if (warning) assert.ok(warnings.some((w) => warning.test(w)), warnings.join('\n'));
    });
  }

  it('a number clamped by the core warns once, naming the setting', async () => {
    const seen = [];
    native.setLogHandler((level, message) => seen.push(message));
    try {
      const r = resolveConfig({ appName: 'a', flushIntervalMs: 11 }, {}, native);
      assert.strictEqual(r.core.upload_interval, '0.05');
      native.resolveSettings(r.settings, r.env); // the same input again: no second warning
      for (let i = 0; i < 5 && !seen.length; i++) await new Promise((res) => setTimeout(res, 20));
      await new Promise((res) => setTimeout(res, 50));
    } finally {
      native.setLogHandler(null);
    }
    const mine = seen.filter((m) => /upload_interval: 0.011 s is out of range/.test(m));
    assert.strictEqual(mine.length, 1, seen.join('\n'));
    assert.match(mine[0], /using 0.05 s/);
  });

  for (const [what, options, re] of REFUSED) {
    it(`refused: ${what}`, () => {
      assert.throws(() => resolveConfig(options, {}, native),
        (e) => re.test(e.message) && e.code === 'ERR_PYROSCOPE_CONFIG');
    });
  }
});
