'use strict';
// User options (the @pyroscope/nodejs 0.6.4 names plus our shared settings in camelCase)
// -> core settings + what the profilers and the frame mapper need. The core's settings
// table (native.settingTable()) says which option is which setting and of what kind; the
// core applies PYROSCOPE_*/OTEL_* variables under its precedence rule (an option wins)
// and the default destination. Pure: no native calls, so it is unit-tested alone.

// Options of the anchor that are not core settings (read below).
const ANCHOR_ONLY = new Set([
  'authToken', 'flushIntervalMs', 'wall', 'heap', 'sourceMapper', 'stripFilenames',
  'shortenPaths',
]);
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

// Settings the anchor sent without checking their type (tenantID as the X-Scope-OrgID
// header, basic auth in a template string: @pyroscope/nodejs 0.6.4
// pyroscope-api-exporter.js buildRequestHeaders): a number there is its text.
const NUMBER_AS_TEXT = new Set(['tenant_id', 'basic_auth_username', 'basic_auth_password']);

// tags as an array (the anchor's check-pyroscope-config.js takes any object, an array
// too): [k, v] entries and "k=v" strings are tags; anything else is left out, said once.
function tagsOfArray(optName, list, warnings) {
  const out = {};
  for (const item of list) {
    if (Array.isArray(item) && item.length === 2 && typeof item[0] === 'string') {
      out[item[0]] = item[1];
    } else if (typeof item === 'string' && item.includes('=')) {
      const eq = item.indexOf('=');
      out[item.slice(0, eq).trim()] = item.slice(eq + 1).trim();
    } else {
      warnings.push(`${optName}: the entry ${describe(item)} is neither [key, value] nor ` +
        '"key=value"; it is left out (give tags as an object)');
    }
  }
  return out;
}

// An option value for the core (by the kind of its row): a string, or pairs.
function coreValue(optName, row, v, warnings) {
  if (NUMBER_AS_TEXT.has(row.name) && typeof v === 'number' && Number.isFinite(v)) return String(v);
  if (row.name === 'tags' && Array.isArray(v)) v = tagsOfArray(optName, v, warnings);
  switch (row.kind) {
    case 'bool': return checkBool(optName, v);
    case 'number': return checkNumber(optName, v, false);
    case 'integer': return checkNumber(optName, v, true);
    case 'duration': return typeof v === 'string' ? v : checkNumber(optName, v, false);
    case 'pairs': return checkPairs(optName, v, row.name === 'tags');
    case 'level':
      if (typeof v === 'string' || typeof v === 'number') return v;
      throw configError(`${optName} must be a level name (${row.spellings}) or a number, ` +
        `not ${describe(v)}`);
    default: return checkString(optName, v);
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

// The core's boolean words (its bool rows' spellings: true, false, 1, 0, ...).
function envBool(env, name) {
  const raw = envValue(env, name);
  if (raw === undefined) return undefined;
  const i = BOOL_WORDS.indexOf(raw.toLowerCase());
  if (i >= 0) return i % 2 === 0;
  const setting = name.slice('PYROSCOPE_'.length).toLowerCase();
  throw configError(`environment variable ${name}: ${setting}: "${raw}" is not a boolean ` +
    `(use ${BOOL_WORDS.join(', ')})`);
}
let BOOL_WORDS = ['true', 'false', '1', '0', 'yes', 'no', 'on', 'off'];

// The anchor's own variables (@pyroscope/nodejs 0.6.4 utils/get-env.js) were read with
// Number(), === 'true' and a match of 'all'/'dependencies', and never refused: a
// malformed one is left out here, with a warning naming it, and its default used.
function lenient(warnings, parse) {
  return (env, name) => {
    try {
      return parse(env, name);
    } catch (e) {
      if (e.code !== 'ERR_PYROSCOPE_CONFIG') throw e;
      warnings.push(`${e.message}; it is ignored (the default is used)`);
      return undefined;
    }
  };
}

function envPositiveInt(env, name) {
  const v = envNumber(env, name, true);
  return v === undefined ? v : checkPositiveInt(`environment variable ${name}`, v);
}

function checkMicros(from, v) {
  if (v < 100 || v > 1e7) {
    throw configError(`${from}: ${v} is out of range; it must be between ` +
      '100 and 10000000 microseconds (10 kHz to 0.1 Hz)');
  }
  return v;
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
 * table: native.settingTable(), the core's settings. Returns
 *   { settings, env, origins, kind, wall, heap, memory, frames, warnings }
 * (memory: true, false or undefined: the `memory` setting, if given; start() runs the heap
 * profile unless it is false)
 * settings/env go to native.start; origins maps a core name to the option or
 * variable it came from (to name it in the core's errors).
 */
function resolveConfig(options, env, table) {
  if (options === undefined || options === null) options = {};
  if (!isPlainObject(options)) throw configError('init() expects an object of options');
  env = env || {};
  const known = new Map(); // option name -> row
  const noEffect = new Set(); // settings of other bindings (no keyword here)
  const byName = {};
  for (const row of table) {
    byName[row.name] = row;
    if (row.kind === 'bool') BOOL_WORDS = row.spellings.split(',');
    if (row.external) continue;
    if (row.node) for (const kw of row.node.split('|')) known.set(kw, row);
    else if (!row.binding) noEffect.add(camel(row.name));
  }
  const defaultOf = (name) => Number(byName[name].default);

  const settings = {};
  const origins = {};
  const warnings = [];
  const given = new Set(); // core names set by an option
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined) continue; // the anchor treats undefined as absent
    if (ANCHOR_ONLY.has(key)) continue;
    if (noEffect.has(key)) {
      warnings.push(`option ${key} has no effect in Node.js and is ignored`);
      continue;
    }
    const row = known.get(key);
    if (!row) {
      // The anchor's check-pyroscope-config.js looks at its own keys only: others
      // (sourceMapPath, labels, ...) were ignored, and are here, with a warning.
      let hint = '';
      if (known.has(camel(key))) hint = ` (did you mean ${camel(key)}?)`;
      warnings.push(`unknown option "${key}"${hint} is ignored; known options: ` +
        [...known.keys(), ...ANCHOR_ONLY].sort().join(', '));
      continue;
    }
    const core = row.name;
    if (given.has(core)) {
      throw configError(`${origins[core]} and ${key} are the same setting; give only one`);
    }
    settings[core] = coreValue(key, row, value, warnings);
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
      warnings.push(`unknown option "wall.${k}" is ignored; known: wall.samplingDurationMs, ` +
        'wall.samplingIntervalMicros, wall.collectCpuTime');
    }
  }
  for (const k of Object.keys(heapOpt)) {
    if (!['samplingIntervalBytes', 'stackDepth', 'allocations'].includes(k)) {
      warnings.push(`unknown option "heap.${k}" is ignored; known: heap.samplingIntervalBytes, ` +
        'heap.stackDepth, heap.allocations');
    }
  }

  const pick = (opt, optName, check, envVar, envParse) => {
    if (opt !== undefined) return { value: check(optName, opt), from: optName };
    const v = envParse(env, envVar);
    return v === undefined ? undefined : { value: v, from: `environment variable ${envVar}` };
  };

  const wall = {
    samplingDurationMs: defaultOf('wall_sampling_duration_ms'),
    collectCpuTime: false,
  };
  const dur = pick(wallOpt.samplingDurationMs, 'wall.samplingDurationMs', checkPositiveInt,
    'PYROSCOPE_WALL_SAMPLING_DURATION_MS', lenient(warnings, envPositiveInt));
  if (dur) wall.samplingDurationMs = checkPositiveInt(dur.from, dur.value);
  const cpuTime = pick(wallOpt.collectCpuTime, 'wall.collectCpuTime', checkBool,
    'PYROSCOPE_WALL_COLLECT_CPU_TIME', lenient(warnings, envBool));
  if (cpuTime) wall.collectCpuTime = cpuTime.value;

  // Sampling rate: sampleRate (Hz) and wall.samplingIntervalMicros are one setting.
  const micros = pick(wallOpt.samplingIntervalMicros, 'wall.samplingIntervalMicros',
    checkPositiveInt, 'PYROSCOPE_WALL_SAMPLING_INTERVAL_MICROS',
    lenient(warnings, (e, n) => {
      const v = envPositiveInt(e, n);
      return v === undefined ? v : checkMicros(`environment variable ${n}`, v);
    }));
  if (micros) {
    checkMicros(micros.from, micros.value);
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
  // The anchor took any whole flushIntervalMs (check-pyroscope-config.js
  // hasValidFlushInterval); one <= 0 made its setTimeout fire at once, each time.
  const flushMs = options.flushIntervalMs;
  if (flushMs !== undefined && checkNumber('flushIntervalMs', flushMs, true) <= 0) {
    warnings.push(`flushIntervalMs: ${flushMs} is not a positive whole number of ` +
      'milliseconds; it is ignored (the default upload period is used)');
  } else if (flushMs !== undefined) {
    if (given.has('upload_interval')) {
      throw configError(`${origins.upload_interval} and flushIntervalMs are the same ` +
        'setting (the upload period); give only one');
    }
    settings.upload_interval = `${options.flushIntervalMs}ms`;
    origins.upload_interval = 'flushIntervalMs';
    given.add('upload_interval');
  } else if (!given.has('upload_interval')) {
    const ms = lenient(warnings, envPositiveInt)(env, 'PYROSCOPE_FLUSH_INTERVAL_MS');
    if (ms !== undefined) {
      if (envValue(env, 'PYROSCOPE_UPLOAD_INTERVAL') !== undefined) {
        throw configError('environment variables PYROSCOPE_UPLOAD_INTERVAL and ' +
          'PYROSCOPE_FLUSH_INTERVAL_MS are the same setting (the upload period); set only one');
      }
      settings.upload_interval = `${ms}ms`;
      origins.upload_interval = 'environment variable PYROSCOPE_FLUSH_INTERVAL_MS';
      given.add('upload_interval');
    }
  }

  // authToken -> a Bearer Authorization header. With basic auth too, the token is sent
  // and basic auth is not, as the anchor did (pyroscope-api-exporter.js
  // buildRequestHeaders: the token, else basic auth); said once.
  const token = pick(options.authToken, 'authToken', checkString, 'PYROSCOPE_AUTH_TOKEN',
    envValue);
  if (token && token.value !== '') {
    const basic = given.has('basic_auth_username') || given.has('basic_auth_password') ||
      ['PYROSCOPE_BASIC_AUTH_USERNAME', 'PYROSCOPE_BASIC_AUTH_USER',
        'PYROSCOPE_BASIC_AUTH_PASSWORD'].some((v) => envValue(env, v) !== undefined);
    if (basic) {
      warnings.push(`${token.from} and basic auth (basicAuthUser/basicAuthPassword) are ` +
        'both set; the token is sent and basic auth is not (as @pyroscope/nodejs did)');
      for (const name of ['basic_auth_username', 'basic_auth_password']) {
        settings[name] = ''; // given, so the core reads no variable for it either
        origins[name] = origins[name] || token.from;
        given.add(name);
      }
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

  // The heap profile is the shared `memory` profile: `memory` says whether start() runs
  // it (not given: yes, as @pyroscope/nodejs's start() did), and its sampling interval is
  // one setting under two names, memoryInterval (PYROSCOPE_MEMORY_INTERVAL) and the
  // anchor's heap.samplingIntervalBytes (PYROSCOPE_HEAP_SAMPLING_INTERVAL_BYTES).
  const heap = {
    samplingIntervalBytes: defaultOf('memory_interval'),
    stackDepth: defaultOf('heap_stack_depth'),
  };
  let memory;
  if (given.has('memory')) memory = settings.memory;
  else memory = envBool(env, 'PYROSCOPE_MEMORY');
  let bytes;
  if (heapOpt.samplingIntervalBytes !== undefined) {
    bytes = { value: checkPositiveInt('heap.samplingIntervalBytes', heapOpt.samplingIntervalBytes),
      from: 'heap.samplingIntervalBytes' };
    if (given.has('memory_interval') && settings.memory_interval !== bytes.value) {
      throw configError(`${origins.memory_interval} (${settings.memory_interval}) and ` +
        `heap.samplingIntervalBytes (${bytes.value}) are the same setting (the memory ` +
        'sampling interval); give only one');
    }
  } else if (given.has('memory_interval')) {
    bytes = { value: checkPositiveInt(origins.memory_interval, settings.memory_interval),
      from: origins.memory_interval };
  } else {
    let mine;
    try {
      mine = envNumber(env, 'PYROSCOPE_MEMORY_INTERVAL', true);
    } catch (e) {
      throw configError(e.message.replace('PYROSCOPE_MEMORY_INTERVAL:', 'PYROSCOPE_MEMORY_INTERVAL: memory_interval:'));
    }
    const anchor = lenient(warnings, envPositiveInt)(env, 'PYROSCOPE_HEAP_SAMPLING_INTERVAL_BYTES');
    if (mine !== undefined && anchor !== undefined && mine !== anchor) {
      throw configError(`environment variables PYROSCOPE_MEMORY_INTERVAL (${mine}) and ` +
        `PYROSCOPE_HEAP_SAMPLING_INTERVAL_BYTES (${anchor}) are the same setting (the memory ` +
        'sampling interval); set only one');
    }
    if (mine !== undefined) { // its range is the core's to check (and name)
      bytes = { value: mine, from: 'environment variable PYROSCOPE_MEMORY_INTERVAL' };
    } else if (anchor !== undefined) {
      bytes = { value: anchor, from: 'environment variable PYROSCOPE_HEAP_SAMPLING_INTERVAL_BYTES' };
    }
  }
  if (bytes) {
    heap.samplingIntervalBytes = bytes.value;
    // the core checks its range (memory_interval: 1 B-256 MiB) and names the option
    settings.memory_interval = bytes.value;
    origins.memory_interval = bytes.from;
    given.add('memory_interval');
  }
  // Allocations instead of in-use memory: Node 26's v8.startHeapProfile only.
  heap.allocations = false;
  const allocs = pick(heapOpt.allocations, 'heap.allocations', checkBool,
    'PYROSCOPE_HEAP_ALLOCATIONS', envBool);
  if (allocs && allocs.value) {
    if (typeof require('v8').startHeapProfile === 'function') heap.allocations = true;
    else {
      warnings.push(`${allocs.from}: allocation profiles need Node 26 or newer ` +
        `(v8.startHeapProfile); Node ${process.versions.node} profiles in-use memory instead`);
    }
  }
  const depth = pick(heapOpt.stackDepth, 'heap.stackDepth', checkPositiveInt,
    'PYROSCOPE_HEAP_STACK_DEPTH', lenient(warnings, envPositiveInt));
  if (depth) heap.stackDepth = checkPositiveInt(depth.from, depth.value);

  const frames = { sourceMapper: undefined, stripFilenames: undefined, shortenPaths: false };
  if (options.sourceMapper !== undefined && options.sourceMapper !== null) {
    if (typeof options.sourceMapper.mappingInfo !== 'function') {
      throw configError('sourceMapper must be a SourceMapper (from SourceMapper.create())');
    }
    frames.sourceMapper = options.sourceMapper;
  }
  const strip = pick(options.stripFilenames, 'stripFilenames', checkStripMode,
    'PYROSCOPE_STRIP_FILENAMES', lenient(warnings, (e, n) => {
      const v = envValue(e, n);
      return v === undefined ? undefined : checkStripMode(`environment variable ${n}`, v);
    }));
  if (strip) frames.stripFilenames = strip.value;
  const shorten = pick(options.shortenPaths, 'shortenPaths', checkBool,
    'PYROSCOPE_SHORTEN_PATHS', lenient(warnings, envBool));
  if (shorten) frames.shortenPaths = shorten.value;

  // The time profile: on-CPU (the shared default) or wall clock. Asking for the anchor's
  // wall.collectCpuTime without saying oncpu means wall profiles with CPU time in them.
  let oncpu = !(cpuTime && cpuTime.value === true);
  if (given.has('oncpu')) oncpu = settings.oncpu;
  else if (envBool(env, 'PYROSCOPE_ONCPU') !== undefined) oncpu = envBool(env, 'PYROSCOPE_ONCPU');

  // The core's environment: it reads PYROSCOPE_* and OTEL_* itself, skipping the
  // variables of settings given here (an option wins) and the anchor's (read above).
  const coreEnv = {};
  for (const [k, v] of Object.entries(env)) {
    if (typeof v === 'string' && (k.startsWith('OTEL_') || k.startsWith('PYROSCOPE_'))) coreEnv[k] = v;
  }

  return {
    settings, env: coreEnv, origins, kind: oncpu ? 'cpu' : 'wall', wall, heap, memory, frames,
    warnings,
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

module.exports = { resolveConfig, renameError, configError, camel };
