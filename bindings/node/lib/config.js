'use strict';
// User options (the @pyroscope/nodejs 0.6.4 names plus our shared settings in camelCase)
// and PYROSCOPE_* variables -> core settings + what the profilers and the frame mapper need.
// Pure: no native calls, so it is unit-tested alone. An option wins over its variable.

const DEFAULT_SERVER_ADDRESS = 'http://localhost:4040';
const DEFAULT_HEAP_INTERVAL_BYTES = 512 * 1024;
const DEFAULT_HEAP_STACK_DEPTH = 64;
const DEFAULT_WALL_DURATION_MS = 60000;

// Core settings the package sets itself (not user options).
const INTERNAL = new Set(['spy_name', 'runtime_name', 'runtime_version']);

// How a core setting's option value is checked; names not listed take a string,
// number or boolean (a setting the core gained after this file was written).
const KIND = {
  application_name: 'string', server_address: 'string', basic_auth_username: 'string',
  basic_auth_password: 'string', tenant_id: 'string', output_dir: 'string',
  otlp_endpoint: 'string', resource_attributes: 'string',
  oncpu: 'bool', report_pid: 'bool', report_thread_id: 'bool', report_thread_name: 'bool',
  fault_guard: 'bool', strict_labels: 'bool',
  sample_rate: 'number', sampler_cpu_budget: 'number', max_stacks: 'int', max_depth: 'int',
  upload_interval: 'duration', stop_timeout: 'duration',
  tags: 'pairs', http_headers: 'pairs', otlp_headers: 'pairs',
  log_level: 'level',
};

// Anchor names that are aliases of a shared setting (both spellings accepted).
const ALIASES = {
  appName: 'application_name',
  basicAuthUser: 'basic_auth_username',
  tenantID: 'tenant_id',
};

// Options of the anchor that are not core settings.
const ANCHOR_ONLY = new Set([
  'authToken', 'flushIntervalMs', 'wall', 'heap', 'sourceMapper', 'stripFilenames',
  'shortenPaths',
]);

// The anchor's variables: converted here, never handed to the core (it would warn).
const ANCHOR_ENV = [
  'PYROSCOPE_FLUSH_INTERVAL_MS', 'PYROSCOPE_WALL_SAMPLING_INTERVAL_MICROS',
  'PYROSCOPE_WALL_SAMPLING_DURATION_MS', 'PYROSCOPE_WALL_COLLECT_CPU_TIME',
  'PYROSCOPE_HEAP_SAMPLING_INTERVAL_BYTES', 'PYROSCOPE_HEAP_STACK_DEPTH',
  'PYROSCOPE_AUTH_TOKEN', 'PYROSCOPE_ADHOC_SERVER_ADDRESS', 'PYROSCOPE_STRIP_FILENAMES',
  'PYROSCOPE_SHORTEN_PATHS',
];

const TRUE = ['1', 'true', 'yes', 'on'];
const FALSE = ['0', 'false', 'no', 'off'];

function configError(message) {
  const err = new Error(message);
  err.code = 'ERR_PYROSCOPE_CONFIG';
  return err;
}

function camel(snake) {
  return snake.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
}

function envName(coreName) {
  return 'PYROSCOPE_' + coreName.toUpperCase();
}

function describe(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v === 'string' ? JSON.stringify(v) : `${typeof v} ${String(v)}`;
}

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function checkString(name, v) {
  if (typeof v !== 'string') throw configError(`${name} must be a string, not ${describe(v)}`);
  return v;
}

function checkBool(name, v) {
  if (typeof v !== 'boolean') throw configError(`${name} must be a boolean, not ${describe(v)}`);
  return v;
}

function checkNumber(name, v, integer) {
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw configError(`${name} must be a finite number, not ${describe(v)}`);
  }
  if (integer && !Number.isInteger(v)) {
    throw configError(`${name} must be a whole number, not ${v}`);
  }
  return v;
}

function checkPositiveInt(name, v) {
  checkNumber(name, v, true);
  if (v <= 0) throw configError(`${name} must be a positive whole number, not ${v}`);
  return v;
}

// {k: v} -> [[k, v], ...]; numbers become strings (the anchor accepts them in tags).
function checkPairs(name, v, numbersToo) {
  if (!isPlainObject(v)) {
    throw configError(`${name} must be an object of string values, not ${describe(v)}`);
  }
  const out = [];
  for (const [k, val] of Object.entries(v)) {
    if (typeof val === 'string' || (numbersToo && typeof val === 'number' && Number.isFinite(val))) {
      out.push([k, String(val)]);
    } else {
      const kinds = numbersToo ? 'a string or a number' : 'a string';
      throw configError(`${name}: the value of "${k}" must be ${kinds}, not ${describe(val)}`);
    }
  }
  return out;
}

// An option value for the core: a string, or pairs for tags/headers.
function coreValue(optName, coreName, v) {
  switch (KIND[coreName]) {
    case 'string': return checkString(optName, v);
    case 'bool': return checkBool(optName, v);
    case 'number': return checkNumber(optName, v, false);
    case 'int': return checkNumber(optName, v, true);
    case 'duration':
      if (typeof v === 'string') return v;
      return checkNumber(optName, v, false);
    case 'pairs': return checkPairs(optName, v, coreName === 'tags');
    case 'level':
      if (typeof v === 'string' || typeof v === 'number') return v;
      throw configError(`${optName} must be a level name (debug, info, warning, error, off) or a ` +
        `number, not ${describe(v)}`);
    default:
      if (['string', 'number', 'boolean'].includes(typeof v)) return v;
      throw configError(`${optName} must be a string, number or boolean, not ${describe(v)}`);
  }
}

function envValue(env, name) {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function envNumber(env, name, integer) {
  const raw = envValue(env, name);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || (integer && !Number.isInteger(n))) {
    throw configError(`environment variable ${name}: "${raw}" is not ${integer ? 'a whole number' : 'a number'}`);
  }
  return n;
}

function envBool(env, name) {
  const raw = envValue(env, name);
  if (raw === undefined) return undefined;
  const low = raw.toLowerCase();
  if (TRUE.includes(low)) return true;
  if (FALSE.includes(low)) return false;
  throw configError(`environment variable ${name}: "${raw}" is not a boolean ` +
    '(use true/false, 1/0, yes/no, on/off)');
}

function checkStripMode(name, v) {
  if (v === 'all' || v === 'dependencies') return v;
  throw configError(`${name} must be 'all' or 'dependencies', not ${describe(v)}`);
}

// "k=v,k2=v2" (the core's syntax) -> pairs; used only to merge an auth token into
// PYROSCOPE_HTTP_HEADERS, which the core then no longer reads.
function parseEnvPairs(name, raw) {
  const out = [];
  for (const item of raw.split(',')) {
    const t = item.trim();
    if (!t) continue;
    const eq = t.indexOf('=');
    if (eq < 0) throw configError(`environment variable ${name}: "${t}" is not key=value`);
    out.push([t.slice(0, eq).trim(), t.slice(eq + 1).trim()]);
  }
  return out;
}

/**
 * options: the object given to init(); env: process.env (or a test's object);
 * coreNames: native.settingNames(). Returns
 *   { settings, env, origins, kind, wall, heap, frames, unknownEnv }
 * settings/env go to native.start; origins maps a core name to the option or
 * variable it came from (to name it in the core's errors).
 */
function resolveConfig(options, env, coreNames) {
  if (options === undefined || options === null) options = {};
  if (!isPlainObject(options)) throw configError('init() expects an object of options');
  env = env || {};
  const known = new Map(); // option name -> core name
  for (const core of coreNames) {
    if (!INTERNAL.has(core)) known.set(camel(core), core);
  }
  for (const [alias, core] of Object.entries(ALIASES)) known.set(alias, core);

  const settings = {};
  const origins = {};
  const given = new Set(); // core names set by an option
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined) continue; // the anchor treats undefined as absent
    if (ANCHOR_ONLY.has(key)) continue;
    const core = known.get(key);
    if (!core) {
      let hint = '';
      if (known.has(camel(key))) hint = ` (did you mean ${camel(key)}?)`;
      throw configError(`unknown option "${key}"${hint}; known options: ` +
        [...known.keys(), ...ANCHOR_ONLY].sort().join(', '));
    }
    if (given.has(core)) {
      throw configError(`${origins[core]} and ${key} are the same setting; give only one`);
    }
    settings[core] = coreValue(key, core, value);
    origins[core] = key;
    given.add(core);
  }

  // Anchor-only options, each beside its variable.
  const wallOpt = options.wall === undefined ? {} : options.wall;
  const heapOpt = options.heap === undefined ? {} : options.heap;
  if (!isPlainObject(wallOpt)) throw configError(`wall must be an object, not ${describe(wallOpt)}`);
  if (!isPlainObject(heapOpt)) throw configError(`heap must be an object, not ${describe(heapOpt)}`);
  for (const k of Object.keys(wallOpt)) {
    if (!['samplingDurationMs', 'samplingIntervalMicros', 'collectCpuTime'].includes(k)) {
      throw configError(`unknown option "wall.${k}"; known: wall.samplingDurationMs, ` +
        'wall.samplingIntervalMicros, wall.collectCpuTime');
    }
  }
  for (const k of Object.keys(heapOpt)) {
    if (!['samplingIntervalBytes', 'stackDepth'].includes(k)) {
      throw configError(`unknown option "heap.${k}"; known: heap.samplingIntervalBytes, ` +
        'heap.stackDepth');
    }
  }

  const pick = (opt, optName, check, envVar, envParse) => {
    if (opt !== undefined) return { value: check(optName, opt), from: optName };
    const v = envParse(env, envVar);
    return v === undefined ? undefined : { value: v, from: `environment variable ${envVar}` };
  };

  const wall = {
    samplingDurationMs: DEFAULT_WALL_DURATION_MS,
    collectCpuTime: false,
  };
  const dur = pick(wallOpt.samplingDurationMs, 'wall.samplingDurationMs', checkPositiveInt,
    'PYROSCOPE_WALL_SAMPLING_DURATION_MS', (e, n) => envNumber(e, n, true));
  if (dur) wall.samplingDurationMs = checkPositiveInt(dur.from, dur.value);
  const cpuTime = pick(wallOpt.collectCpuTime, 'wall.collectCpuTime', checkBool,
    'PYROSCOPE_WALL_COLLECT_CPU_TIME', envBool);
  if (cpuTime) wall.collectCpuTime = cpuTime.value;

  // Sampling rate: sampleRate (Hz) and wall.samplingIntervalMicros are one setting.
  const micros = pick(wallOpt.samplingIntervalMicros, 'wall.samplingIntervalMicros',
    checkPositiveInt, 'PYROSCOPE_WALL_SAMPLING_INTERVAL_MICROS', (e, n) => envNumber(e, n, true));
  if (micros) {
    if (micros.value < 100 || micros.value > 1e7) {
      throw configError(`${micros.from}: ${micros.value} is out of range; it must be between ` +
        '100 and 10000000 microseconds (10 kHz to 0.1 Hz)');
    }
    const hz = 1e6 / micros.value;
    const fromOption = micros.from === 'wall.samplingIntervalMicros';
    if (given.has('sample_rate')) {
      if (fromOption && Math.abs(Number(settings.sample_rate) - hz) > 1e-6 * hz) {
        throw configError(`${origins.sample_rate} (${settings.sample_rate} Hz) and ` +
          `wall.samplingIntervalMicros (${micros.value} µs = ${hz} Hz) disagree; give only one`);
      }
    } else if (fromOption || envValue(env, 'PYROSCOPE_SAMPLE_RATE') === undefined) {
      settings.sample_rate = hz;
      origins.sample_rate = micros.from;
      given.add('sample_rate');
    }
  }

  // Period: uploadInterval (seconds or "10s") and the anchor's flushIntervalMs are one
  // setting. Two options (or two variables) for it are refused rather than guessed at.
  if (options.flushIntervalMs !== undefined) {
    checkPositiveInt('flushIntervalMs', options.flushIntervalMs);
    if (given.has('upload_interval')) {
      throw configError(`${origins.upload_interval} and flushIntervalMs are the same ` +
        'setting (the upload period); give only one');
    }
    settings.upload_interval = `${options.flushIntervalMs}ms`;
    origins.upload_interval = 'flushIntervalMs';
    given.add('upload_interval');
  } else if (!given.has('upload_interval')) {
    const ms = envNumber(env, 'PYROSCOPE_FLUSH_INTERVAL_MS', true);
    if (ms !== undefined) {
      if (envValue(env, 'PYROSCOPE_UPLOAD_INTERVAL') !== undefined) {
        throw configError('environment variables PYROSCOPE_UPLOAD_INTERVAL and ' +
          'PYROSCOPE_FLUSH_INTERVAL_MS are the same setting (the upload period); set only one');
      }
      checkPositiveInt('environment variable PYROSCOPE_FLUSH_INTERVAL_MS', ms);
      settings.upload_interval = `${ms}ms`;
      origins.upload_interval = 'environment variable PYROSCOPE_FLUSH_INTERVAL_MS';
      given.add('upload_interval');
    }
  }

  // Server address: the anchor lets PYROSCOPE_ADHOC_SERVER_ADDRESS override even the option.
  const adhoc = envValue(env, 'PYROSCOPE_ADHOC_SERVER_ADDRESS');
  if (adhoc !== undefined) {
    settings.server_address = adhoc;
    origins.server_address = 'environment variable PYROSCOPE_ADHOC_SERVER_ADDRESS';
    given.add('server_address');
  }

  // authToken -> a Bearer Authorization header (the anchor prefers it to basic auth;
  // here both at once is refused, since the server would see one of them only).
  const token = pick(options.authToken, 'authToken', checkString, 'PYROSCOPE_AUTH_TOKEN',
    envValue);
  if (token && token.value !== '') {
    const basic = given.has('basic_auth_username') || given.has('basic_auth_password') ||
      envValue(env, 'PYROSCOPE_BASIC_AUTH_USERNAME') !== undefined;
    if (basic) {
      throw configError(`${token.from} and basic auth (basicAuthUser/basicAuthPassword) are ` +
        'both set; the server takes one Authorization header: give only one');
    }
    if (/[\r\n]/.test(token.value)) throw configError(`${token.from} must not contain a line break`);
    let headers = settings.http_headers;
    let headersFrom = origins.http_headers;
    if (headers === undefined) {
      const raw = envValue(env, 'PYROSCOPE_HTTP_HEADERS');
      headers = raw === undefined ? [] : parseEnvPairs('PYROSCOPE_HTTP_HEADERS', raw);
      headersFrom = 'environment variable PYROSCOPE_HTTP_HEADERS';
    }
    if (headers.some(([k]) => k.toLowerCase() === 'authorization')) {
      throw configError(`${token.from} and an Authorization header in ${headersFrom} are ` +
        'both set; give only one');
    }
    settings.http_headers = [...headers, ['Authorization', `Bearer ${token.value}`]];
    origins.http_headers = origins.http_headers || token.from;
    given.add('http_headers');
  }

  // No destination at all: upload to the anchor's default server, as it does
  // (an OTLP endpoint, by either OTEL_ variable, is one).
  const hasDest = ['server_address', 'output_dir', 'otlp_endpoint'].some(
    (c) => given.has(c) || envValue(env, envName(c)) !== undefined) ||
    envValue(env, 'OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT') !== undefined ||
    envValue(env, 'OTEL_EXPORTER_OTLP_ENDPOINT') !== undefined;
  if (!hasDest) settings.server_address = DEFAULT_SERVER_ADDRESS;

  const heap = {
    samplingIntervalBytes: DEFAULT_HEAP_INTERVAL_BYTES,
    stackDepth: DEFAULT_HEAP_STACK_DEPTH,
  };
  const bytes = pick(heapOpt.samplingIntervalBytes, 'heap.samplingIntervalBytes',
    checkPositiveInt, 'PYROSCOPE_HEAP_SAMPLING_INTERVAL_BYTES', (e, n) => envNumber(e, n, true));
  if (bytes) heap.samplingIntervalBytes = checkPositiveInt(bytes.from, bytes.value);
  const depth = pick(heapOpt.stackDepth, 'heap.stackDepth', checkPositiveInt,
    'PYROSCOPE_HEAP_STACK_DEPTH', (e, n) => envNumber(e, n, true));
  if (depth) heap.stackDepth = checkPositiveInt(depth.from, depth.value);

  const frames = { sourceMapper: undefined, stripFilenames: undefined, shortenPaths: false };
  if (options.sourceMapper !== undefined && options.sourceMapper !== null) {
    if (typeof options.sourceMapper.mappingInfo !== 'function') {
      throw configError('sourceMapper must be a SourceMapper (from SourceMapper.create())');
    }
    frames.sourceMapper = options.sourceMapper;
  }
  const strip = pick(options.stripFilenames, 'stripFilenames', checkStripMode,
    'PYROSCOPE_STRIP_FILENAMES', (e, n) => {
      const v = envValue(e, n);
      return v === undefined ? undefined : checkStripMode(`environment variable ${n}`, v);
    });
  if (strip) frames.stripFilenames = strip.value;
  const shorten = pick(options.shortenPaths, 'shortenPaths', checkBool,
    'PYROSCOPE_SHORTEN_PATHS', envBool);
  if (shorten) frames.shortenPaths = shorten.value;

  // The time profile: on-CPU (the shared default) or wall clock. Asking for the anchor's
  // wall.collectCpuTime without saying oncpu means wall profiles with CPU time in them.
  let oncpu = !(cpuTime && cpuTime.value === true);
  if (given.has('oncpu')) oncpu = settings.oncpu;
  else if (envBool(env, 'PYROSCOPE_ONCPU') !== undefined) oncpu = envBool(env, 'PYROSCOPE_ONCPU');

  settings.spy_name = 'nodespy';
  settings.runtime_name = 'nodejs';
  settings.runtime_version = process.versions.node;

  // The core's environment: PYROSCOPE_* and OTEL_*, without the anchor's variables
  // (converted above) and without those of settings given here (an option wins, so
  // a bad variable beside it must not fail).
  // Unknown PYROSCOPE_* variables are reported once by init() (the core would warn at
  // every check and start).
  const coreEnv = {};
  const unknownEnv = [];
  const coreSet = new Set(coreNames);
  for (const [k, v] of Object.entries(env)) {
    if (typeof v !== 'string') continue;
    if (k.startsWith('OTEL_')) {
      coreEnv[k] = v;
    } else if (k.startsWith('PYROSCOPE_') && !ANCHOR_ENV.includes(k)) {
      const core = k.slice('PYROSCOPE_'.length).toLowerCase();
      if (k === 'PYROSCOPE_BASIC_AUTH_USER') { // Grafana's name; the core reads it
        if (!given.has('basic_auth_username')) coreEnv[k] = v;
      } else if (!coreSet.has(core)) unknownEnv.push(k);
      else if (!given.has(core)) coreEnv[k] = v;
    }
  }

  return {
    settings, env: coreEnv, origins, kind: oncpu ? 'cpu' : 'wall', wall, heap, frames, unknownEnv,
  };
}

// The core names a setting by its core name ("sample_rate: ..."); say what the user
// wrote instead ("sampleRate (sample_rate): ...").
function renameError(err, origins) {
  if (!err || typeof err.message !== 'string') return err;
  // A setting nobody gave (origins has none): the option and the variable that set it.
  const ANCHOR_NAME = { application_name: 'appName' };
  const core = Object.keys(origins).concat(Object.keys(ANCHOR_NAME))
    .find((name) => err.message.startsWith(name) && /^[: ]/.test(err.message.slice(name.length)));
  if (core) {
    const from = origins[core] || `${ANCHOR_NAME[core]} (option) or ${envName(core)}`;
    err.message = `${from} (${core})${err.message.slice(core.length)}`;
  }
  if (!err.code) err.code = 'ERR_PYROSCOPE_CONFIG';
  return err;
}

module.exports = {
  resolveConfig, renameError, configError, camel, ANCHOR_ENV, DEFAULT_SERVER_ADDRESS,
  DEFAULT_HEAP_INTERVAL_BYTES, DEFAULT_HEAP_STACK_DEPTH,
};
