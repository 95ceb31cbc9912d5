'use strict';
// Reports of saved profiles, from the core's report library: what the options mean (folders
// by type, the default page and title, selections, the page's view) and the run's own
// pages are the core's (pyroscope_report.h); this file maps JS spelling and types to them.
//
//   writeReport(paths, {output, title, filter, groupBy, top, diff, type}) -> Promise<{profiles,
//     output, text, type, otherTypes}>: the public Pyroscope.writeReport and the CLI's engine.
//   beginRun(addon) / endRun(addon) / endRunSync(addon): with a folder output, the pages of
//     the profiles this run wrote, at stop (or exit), logged; they never throw or reject.
const OPTIONS = ['output', 'title', 'filter', 'groupBy', 'top', 'diff', 'type'];

function reportError(message) {
  const e = new Error(message);
  e.code = 'ERR_PYROSCOPE_REPORT';
  return e;
}

// A selection as the addon takes it: "k=v,..." strings and [k, v] pairs ({k: v | [v, ...]}
// becomes pairs; anything else a string the core names in its error).
function selection(what, sel) {
  if (sel === undefined || sel === null || typeof sel === 'string') return sel;
  const isPair = (p) => Array.isArray(p) && p.length === 2 && p.every((s) => typeof s === 'string');
  if (Array.isArray(sel)) return sel.map((p) => (typeof p === 'string' || isPair(p) ? p : JSON.stringify(p)));
  if (typeof sel === 'object') {
    return Object.entries(sel).flatMap(([k, v]) => (Array.isArray(v) ? v : [v]).map((one) => [k, String(one)]));
  }
  throw reportError(`${what}: expected {key: value}, or KEY=VALUE strings`);
}

async function writeReport(addon, paths, options) {
  const opts = options || {};
  if (typeof opts !== 'object') throw new TypeError('writeReport: options must be an object');
  for (const k of Object.keys(opts)) {
    if (!OPTIONS.includes(k)) throw reportError(`writeReport: unknown option ${k} (options: ${OPTIONS.join(', ')})`);
  }
  const { diff } = opts;
  if (diff !== undefined && diff !== null && !(Array.isArray(diff) && diff.length === 2)) {
    throw reportError('diff: two selections [a, b], e.g. [{route: "/a"}, {route: "/b"}]');
  }
  return addon.reportAsync(typeof paths === 'string' ? [paths] : paths, {
    ...opts,
    filter: selection('filter', opts.filter),
    diffA: diff ? selection('diff', diff[0]) : null,
    diffB: diff ? selection('diff', diff[1]) : null,
  });
}

function beginRun(addon) {
  addon.runBegin();
}

function logFailed(addon, e) {
  try {
    addon.log(40, 'cannot write the flame graph: ' + (e && e.message || e));
  } catch (_) { /* logging must not throw either */ }
}

// Each page on its own, on the pool. Never rejects.
async function endRun(addon) {
  try {
    await addon.runEndAsync();
  } catch (e) {
    logFailed(addon, e);
  }
}

// process 'exit': nothing asynchronous runs any more. Never throws.
function endRunSync(addon) {
  try {
    addon.runEnd();
  } catch (e) {
    logFailed(addon, e);
  }
}

module.exports = { writeReport, beginRun, endRun, endRunSync, selection };
