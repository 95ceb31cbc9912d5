'use strict';
// User options (the @pyroscope/nodejs 0.6.4 names plus our shared settings in camelCase)
// -> core settings. The core's settings table (native.settingTable()) says which option
// is which setting and of what kind, the anchor's other spellings included
// (flushIntervalMs, wall.samplingIntervalMicros, heap.samplingIntervalBytes: rows with
// alias_of); the core applies PYROSCOPE_*/OTEL_* variables under its precedence rule
// (an option wins), checks and converts every value, and resolves what only this
// binding acts on (wall.*, heap.*, stripFilenames...). The native half hands each
// value to the core as the JS type it is (src/config_arg.c); the core says whether
// the setting's kind takes it.

function configError(message) {
  const err = new Error(message);
  err.code = 'ERR_PYROSCOPE_CONFIG';
  return err;
}

function camel(snake) {
  return snake.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
}

function describe(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v === 'string' ? JSON.stringify(v) : `${typeof v} ${String(v)}`;
}

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
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

// An option's value for the core, which checks its type (in Node's words), range and
// syntax and names the setting; here only the leniencies kept from the anchor.
function coreValue(optName, row, v, warnings) {
  if (NUMBER_AS_TEXT.has(row.name) && typeof v === 'number' && Number.isFinite(v)) return String(v);
  if (row.name !== 'tags') return v;
  if (Array.isArray(v)) v = tagsOfArray(optName, v, warnings);
  if (!isPlainObject(v)) return v;
  // numbers as tag values: their text (the anchor's tags took any value)
  return Object.fromEntries(Object.entries(v).map(([k, x]) =>
    [k, typeof x === 'number' && Number.isFinite(x) ? String(x) : x]));
}

// The options as [name, value], wall: {x} and heap: {x} as "wall.x", "heap.x".
function flatOptions(options) {
  const out = [];
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined) continue; // the anchor treats undefined as absent
    if (key !== 'wall' && key !== 'heap') {
      out.push([key, value]);
      continue;
    }
    if (!isPlainObject(value)) throw configError(`${key} must be an object, not ${describe(value)}`);
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out.push([`${key}.${k}`, v]);
  }
  return out;
}

/**
 * options: the object given to init(); env: process.env (or a test's object);
 * native: lib/native.js (its settingTable() and resolveSettings()). Returns
 *   { settings, env, origins, core, kind, wall, heap, memory, frames, warnings }
 * settings/env go to native.start; core is what it runs with ({core name: string});
 * origins maps a core name to the option that set it (to name it in the core's errors).
 */
function resolveConfig(options, env, native) {
  if (options === undefined || options === null) options = {};
  if (!isPlainObject(options)) throw configError('init() expects an object of options');
  const known = new Map(); // option name -> row
  const noEffect = new Set(); // settings of other bindings (no keyword here)
  for (const row of native.settingTable()) {
    if (row.node) for (const kw of row.node.split('|')) known.set(kw, row);
    else if (!row.binding && !row.external) noEffect.add(camel(row.name));
  }

  const settings = {};
  const origins = {};
  const warnings = [];
  for (const [key, value] of flatOptions(options)) {
    if (key === 'sourceMapper') continue;
    if (noEffect.has(key)) {
      warnings.push(`option ${key} has no effect in Node.js and is ignored`);
      continue;
    }
    const row = known.get(key);
    if (!row) {
      // The anchor's check-pyroscope-config.js looks at its own keys only: others
      // (sourceMapPath, labels, wall.interval, ...) were ignored, and are here.
      const hint = known.has(camel(key)) ? ` (did you mean ${camel(key)}?)` : '';
      const near = [...known.keys(), 'sourceMapper'].filter((k) => k.includes('.') === key.includes('.'));
      warnings.push(`unknown option "${key}"${hint} is ignored; known options: ${near.sort().join(', ')}`);
      continue;
    }
    if (origins[row.name]) {
      throw configError(`${origins[row.name]} and ${key} are the same setting; give only one`);
    }
    settings[row.name] = coreValue(key, row, value, warnings);
    origins[row.name] = key;
  }
  if (options.sourceMapper !== undefined && options.sourceMapper !== null &&
      typeof options.sourceMapper.mappingInfo !== 'function') {
    throw configError('sourceMapper must be a SourceMapper (from SourceMapper.create())');
  }

  // The core's environment: it reads PYROSCOPE_* and OTEL_* itself, skipping the
  // variables of settings given here (an option wins).
  const coreEnv = {};
  for (const [k, v] of Object.entries(env || {})) {
    if (typeof v === 'string' && (k.startsWith('OTEL_') || k.startsWith('PYROSCOPE_'))) coreEnv[k] = v;
  }
  let core;
  try {
    core = native.resolveSettings(settings, coreEnv);
  } catch (e) {
    throw renameError(e, origins);
  }

  // Allocations instead of in-use memory: Node 26's v8.startHeapProfile only.
  let allocations = core.heap_allocations === 'true';
  if (allocations && typeof require('v8').startHeapProfile !== 'function') {
    allocations = false;
    warnings.push(`${origins.heap_allocations || 'PYROSCOPE_HEAP_ALLOCATIONS'}: allocation ` +
      `profiles need Node 26 or newer (v8.startHeapProfile); Node ${process.versions.node} ` +
      'profiles in-use memory instead');
  }
  // The time profile: on-CPU (the shared default) or wall clock. Asking for the anchor's
  // wall.collectCpuTime without saying oncpu means wall profiles with CPU time in them.
  const collectCpuTime = core.wall_collect_cpu_time === 'true';
  const oncpuGiven = 'oncpu' in settings || (coreEnv.PYROSCOPE_ONCPU || '').trim() !== '';
  const oncpu = core.oncpu === 'true' && !(collectCpuTime && !oncpuGiven);
  return {
    settings, env: coreEnv, origins, core, kind: oncpu ? 'cpu' : 'wall', warnings,
    wall: { samplingDurationMs: Number(core.wall_sampling_duration_ms), collectCpuTime },
    heap: { samplingIntervalBytes: Number(core.memory_interval),
      stackDepth: Number(core.heap_stack_depth), allocations },
    // start() runs the heap profile unless memory is false (Node's default is true)
    memory: core.memory === 'true',
    frames: { sourceMapper: options.sourceMapper || undefined,
      stripFilenames: core.strip_filenames || undefined, shortenPaths: core.shorten_paths === 'true' },
  };
}

// The core names a setting by its core name ("sample_rate: ..."); say what the user
// wrote too ("sampleRate (sample_rate): ..."), for each setting an option gave.
function renameError(err, origins) {
  if (!err || typeof err.message !== 'string') return err;
  for (const [core, from] of Object.entries(origins)) {
    if (core === from) continue; // tags: "tags" already says it
    err.message = err.message.replace(new RegExp(`(^|[^A-Za-z_.])${core}(?![A-Za-z_])`),
      (_, before) => `${before}${from} (${core})`);
  }
  // A setting nobody gave: the option and the variable that set it.
  if (!origins.application_name && /^application_name[: ]/.test(err.message)) {
    err.message = 'appName (option) or PYROSCOPE_APPLICATION_NAME (application_name)' +
      err.message.slice('application_name'.length);
  }
  if (!err.code) err.code = 'ERR_PYROSCOPE_CONFIG';
  return err;
}

module.exports = { resolveConfig, renameError, configError, camel };
