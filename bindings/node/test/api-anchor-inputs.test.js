'use strict';
// Issue 28 §2: what @pyroscope/nodejs 0.6.4 accepted at init() still starts, with the
// anchor's meaning (coerced, or defaulted with a warning naming the option); what cannot
// work at all is still an init() error naming it. One row per input, each citing the
// anchor's source (dist/cjs of the 0.6.4 package) that accepted it.
const assert = require('assert');
const { resolveConfig, renameError } = require('../lib/config');
const { loadNative } = require('./api-helpers');

const native = loadNative();
const TABLE = native ? native.settingTable() : [];

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
    /flushIntervalMs: 0 is not a positive whole number.*ignored/],
  ['flushIntervalMs -1', { appName: 'a', flushIntervalMs: -1 }, {}, { upload_interval: '10' },
    /flushIntervalMs: -1/],
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
    { upload_interval: '10' }, /PYROSCOPE_FLUSH_INTERVAL_MS: "soon" is not a whole number; it is ignored/],
  ['PYROSCOPE_FLUSH_INTERVAL_MS=0', { appName: 'a' }, { PYROSCOPE_FLUSH_INTERVAL_MS: '0' },
    { upload_interval: '10' }, /PYROSCOPE_FLUSH_INTERVAL_MS must be a positive whole number/],
  ['PYROSCOPE_HEAP_STACK_DEPTH=1.5', { appName: 'a' }, { PYROSCOPE_HEAP_STACK_DEPTH: '1.5' }, {},
    /PYROSCOPE_HEAP_STACK_DEPTH: "1.5" is not a whole number; it is ignored/],
  ['PYROSCOPE_WALL_COLLECT_CPU_TIME=maybe', { appName: 'a' }, { PYROSCOPE_WALL_COLLECT_CPU_TIME: 'maybe' }, {},
    /PYROSCOPE_WALL_COLLECT_CPU_TIME.*"maybe" is not a boolean.*ignored/],
  ['PYROSCOPE_STRIP_FILENAMES=none', { appName: 'a' }, { PYROSCOPE_STRIP_FILENAMES: 'none' }, {},
    /PYROSCOPE_STRIP_FILENAMES must be 'all' or 'dependencies'.*ignored/],
  ['PYROSCOPE_WALL_SAMPLING_INTERVAL_MICROS=1', { appName: 'a' }, { PYROSCOPE_WALL_SAMPLING_INTERVAL_MICROS: '1' },
    { sample_rate: '100' }, /PYROSCOPE_WALL_SAMPLING_INTERVAL_MICROS: 1 is out of range.*ignored/],
  ['PYROSCOPE_SHORTEN_PATHS=yes please', { appName: 'a' }, { PYROSCOPE_SHORTEN_PATHS: 'yes please' }, {},
    /PYROSCOPE_SHORTEN_PATHS.*ignored/],
];

// Inputs that cannot work at all: still an error naming the option.
const REFUSED = [
  ['an address that is none even with http://', { appName: 'a', serverAddress: 'py roscope:4040' },
    /^serverAddress \(server_address\).*with http:\/\/ in front/],
  ['an address of another scheme', { appName: 'a', serverAddress: 'ftp://h' }, /^serverAddress \(server_address\)/],
  ['a non-integer flushIntervalMs (the anchor refused it too)', { appName: 'a', flushIntervalMs: 1.5 },
    /flushIntervalMs must be a whole number/],
];

describe('api config: what @pyroscope/nodejs took at start-up starts (issue 28 §2)', function () {
  before(function () {
    if (!native) this.skip(); // no lib/native.js in this tree (see loadNative)
  });

  for (const [what, options, env, want, warning] of STARTS) {
    it(`starts: ${what}`, () => {
      const r = resolveConfig(options, env, TABLE);
      let got;
      try {
        got = native.resolveSettings(r.settings, r.env);
      } catch (e) {
        throw renameError(e, r.origins);
      }
      for (const [name, value] of Object.entries(want)) assert.strictEqual(got[name], value, name);
      if (warning) assert.ok(r.warnings.some((w) => warning.test(w)), r.warnings.join('\n'));
    });
  }

  for (const [what, options, re] of REFUSED) {
    it(`refused: ${what}`, () => {
      assert.throws(() => {
        const r = resolveConfig(options, {}, TABLE);
        try {
          native.resolveSettings(r.settings, r.env);
        } catch (e) {
          throw renameError(e, r.origins);
        }
      }, (e) => re.test(e.message) && e.code === 'ERR_PYROSCOPE_CONFIG');
    });
  }
});
