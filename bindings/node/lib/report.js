'use strict';
// Reports of saved profiles: a flame graph page (flamegraph.html) and the top functions,
// from the core's report library (the addon's report/reportAsync).
//
//   writeReport(paths, {output, title, filter, groupBy, top, diff, type}) -> Promise<{profiles,
//     output, text, type, otherTypes}>: the public Pyroscope.writeReport and the CLI's engine.
//     A folder gives its profiles of one type (the core reports one sample type at a time):
//     `type`, else the time profile (cpu, else wall); otherTypes lists those left out.
//   beginRun(addon) / endRun(addon) / endRunSync(addon): the run's own flame graph. When
//     the agent writes to a folder, the core lists it at start; at stop (or exit) each
//     page covers the files that appeared since, the ones this run wrote (the core's run
//     report: its pages per type, the newest 360 each). endRun never throws or rejects:
//     a failure is logged. The folder's listing and file names are the core's.
//
// All state here belongs to the main JS thread.
const fs = require('fs');
const path = require('path');

const REPORT_NAME = 'flamegraph.html';
const DEFAULT_TOP = 20;

function reportError(message) {
  const e = new Error(message);
  e.code = 'ERR_PYROSCOPE_REPORT';
  return e;
}

// Folders expanded to their profiles of one type (the core's pages: options.type, else the
// first, the time profile); files stay as given. -> {files, type, others, page}
function expand(addon, paths, type) {
  const pages = new Map(); // type -> page, the first folder's order
  const files = [];
  for (const p of paths) {
    if (!fs.statSync(p).isDirectory()) {
      files.push(p);
      continue;
    }
    for (const g of addon.folderPages(p)) {
      if (pages.has(g.type)) pages.get(g.type).paths.push(...g.paths);
      else pages.set(g.type, g);
    }
  }
  if (pages.size === 0) {
    if (files.length === 0) {
      throw reportError(`writeReport: no profiles (.pb or .pb.gz files) in ${paths.join(', ')}`);
    }
    return { files, type: null, others: [], page: REPORT_NAME };
  }
  const types = [...pages.keys()];
  const chosen = type || types[0];
  if (!pages.has(chosen)) {
    throw reportError(`type: no ${chosen} profiles in ${paths.join(', ')} ` +
      `(there are: ${types.join(', ')})`);
  }
  return {
    files: [...pages.get(chosen).paths.sort(), ...files], type: chosen,
    others: types.filter((t) => t !== chosen), page: pages.get(chosen).page,
  };
}

// "k=v" (split at the first '=') or [k, v] -> [k, v]; what names the option in errors.
function pair(what, item) {
  if (Array.isArray(item) && item.length === 2 &&
      typeof item[0] === 'string' && typeof item[1] === 'string' && item[0] !== '') {
    return item;
  }
  if (typeof item === 'string') {
    const i = item.indexOf('=');
    if (i > 0) return [item.slice(0, i).trim(), item.slice(i + 1)];
  }
  throw reportError(`${what}: expected KEY=VALUE, got ${JSON.stringify(item)}`);
}

// A selection as [[k, v], ...]: {k: v | [v, ...]}, ["k=v", ...], "k=v,k2=v2" or [[k, v]].
function selection(what, sel) {
  if (sel === undefined || sel === null) return [];
  if (typeof sel === 'string') return sel.split(',').map((p) => pair(what, p));
  if (Array.isArray(sel)) return sel.map((p) => pair(what, p));
  if (typeof sel === 'object') {
    const out = [];
    for (const [k, v] of Object.entries(sel)) {
      for (const one of Array.isArray(v) ? v : [v]) {
        if (typeof one !== 'string' && typeof one !== 'number') {
          throw reportError(`${what}: the value of ${k} must be a string (or a list of them)`);
        }
        out.push(pair(what, [k, String(one)]));
      }
    }
    return out;
  }
  throw reportError(`${what}: expected {key: value}, or KEY=VALUE strings`);
}

// The page's initial view, in its URL-fragment syntax (as the Python CLI writes it).
function viewOf(filter, groupBy, diff) {
  const view = new URLSearchParams();
  const joined = (pairs) => pairs.map(([k, v]) => `${k}=${v}`).join(',');
  if (filter.length) view.set('filter', joined(filter));
  if (groupBy) view.set('group', groupBy);
  if (diff) {
    view.set('diff', '');
    view.set('a', joined(diff[0]));
    view.set('b', joined(diff[1]));
  }
  return view.toString();
}

function defaultOutput(first, page) {
  let dir;
  try {
    dir = fs.statSync(first).isDirectory() ? first : path.dirname(first);
  } catch (_) {
    dir = path.dirname(first);
  }
  return path.join(dir, page);
}

// The addon's arguments from the public options (thrown: ERR_PYROSCOPE_REPORT).
function request(addon, paths, options) {
  const opts = options || {};
  if (typeof opts !== 'object') throw new TypeError('writeReport: options must be an object');
  const list = typeof paths === 'string' ? [paths] : paths;
  if (!Array.isArray(list) || list.length === 0 || list.some((p) => typeof p !== 'string' || !p)) {
    throw reportError('writeReport: paths must be a profile file or folder, or a non-empty list of them');
  }
  for (const p of list) {
    if (!fs.existsSync(p)) throw reportError(`writeReport: ${p}: no such file or folder`);
  }
  const known = ['output', 'title', 'filter', 'groupBy', 'top', 'diff', 'type'];
  for (const k of Object.keys(opts)) {
    if (!known.includes(k)) throw reportError(`writeReport: unknown option ${k} (options: ${known.join(', ')})`);
  }
  const filter = selection('filter', opts.filter);
  const groupBy = opts.groupBy === undefined || opts.groupBy === null ? null : opts.groupBy;
  if (groupBy !== null && (typeof groupBy !== 'string' || !groupBy)) {
    throw reportError('groupBy: a label key (string)');
  }
  const top = opts.top === undefined ? DEFAULT_TOP : opts.top;
  if (!Number.isInteger(top) || top < 0) throw reportError('top: a whole number >= 0');
  let diff = null;
  if (opts.diff !== undefined && opts.diff !== null) {
    if (!Array.isArray(opts.diff) || opts.diff.length !== 2) {
      throw reportError('diff: two selections [a, b], e.g. [{route: "/a"}, {route: "/b"}]');
    }
    diff = [selection('diff', opts.diff[0]), selection('diff', opts.diff[1])];
  }
  if (opts.type !== undefined && opts.type !== null && (typeof opts.type !== 'string' || !opts.type)) {
    throw reportError('type: a profile type (cpu, wall, heap)');
  }
  const found = expand(addon, list, opts.type || null);
  const output = opts.output === undefined ? defaultOutput(list[0], found.page) : opts.output;
  if (output !== null && (typeof output !== 'string' || !output)) {
    throw reportError('output: a file path for the flame graph page (null: none)');
  }
  const title = opts.title === undefined
    ? list.map((p) => path.basename(path.resolve(p))).join(', ')
    : String(opts.title);
  return {
    paths: found.files,
    type: found.type,
    others: found.others,
    args: {
      output, title, top, filter, groupBy,
      view: viewOf(filter, groupBy, diff),
      diffA: diff ? diff[0] : null,
      diffB: diff ? diff[1] : null,
    },
  };
}

async function writeReport(addon, paths, options) {
  const q = request(addon, paths, options);
  const r = await addon.reportAsync(q.paths, q.args);
  return { profiles: r.profiles, output: q.args.output, text: r.text, type: q.type, otherTypes: q.others };
}

// ---- the run's own flame graph

let run = null; // {dir, app} of the agent running now, when it writes to a folder

function beginRun(addon) {
  run = addon.runOutput();
  if (run) addon.runBegin(run.dir);
}

// The reports of the files this run wrote, one per profile type: flamegraph.html for the
// time profile (cpu or wall), flamegraph-<type>.html for the others (heap). [] when none
// (logged).
function takeRun(addon) {
  const r = run;
  run = null;
  const pages = addon.runEnd();
  if (!r) return [];
  if (pages.length === 0) {
    addon.log(20, `no profiles were written to ${r.dir} in this run, so there is no flame graph`);
  }
  return pages.map((g) => {
    const output = path.join(r.dir, g.page);
    if (g.paths.length < g.total) {
      addon.log(20, `the ${g.type} flame graph covers the last ${g.paths.length} of the ` +
        `${g.total} profiles this run wrote`);
    }
    return {
      dir: r.dir,
      output,
      paths: g.paths,
      args: { output, title: `${r.app || 'pyroscope-native'} (${g.type})`, top: 0, view: '' },
    };
  });
}

function logDone(addon, q, result) {
  addon.log(20, `${result.profiles} profile${result.profiles === 1 ? '' : 's'} in ${q.dir}, ` +
    `flame graph: ${q.output}`);
}

function logFailed(addon, e) {
  try {
    addon.log(30, 'cannot write the flame graph: ' + (e && e.message || e));
  } catch (_) { /* logging must not throw either */ }
}

function runReports(addon) {
  try {
    return takeRun(addon);
  } catch (e) {
    logFailed(addon, e);
    return [];
  }
}

// Each page on its own: one failing leaves the others. Never rejects.
async function endRun(addon) {
  for (const q of runReports(addon)) {
    await Promise.resolve()
      .then(() => addon.reportAsync(q.paths, q.args))
      .then((r) => logDone(addon, q, r), (e) => logFailed(addon, e));
  }
}

// process 'exit': nothing asynchronous runs any more. Never throws.
function endRunSync(addon) {
  for (const q of runReports(addon)) {
    try {
      logDone(addon, q, addon.report(q.paths, q.args));
    } catch (e) {
      logFailed(addon, e);
    }
  }
}

module.exports = {
  REPORT_NAME, DEFAULT_TOP, writeReport, beginRun, endRun, endRunSync, selection, pair,
};
