'use strict';
// The package's logger: the anchor's interface (debug/info/warn/error/trace/fatal),
// replaced with setLogger(). Until then warnings and errors go to stderr, because
// they report lost data (a failed upload, a refused label); debug and info stay quiet.
// Owned by the main JS thread (the native log handler delivers there too).

const LEVEL_DEBUG = 10;
const LEVEL_INFO = 20;
const LEVEL_WARN = 30;
const LEVEL_ERROR = 40;


const stderrLogger = {
  error: (...args) => console.error('pyroscope:', ...args),
  warn: (...args) => console.error('pyroscope:', ...args),
  fatal: (...args) => console.error('pyroscope:', ...args),
  info: () => {},
  debug: () => {},
  trace: () => {},
};

let current = stderrLogger;

function setLogger(logger) {
  if (logger === null || logger === undefined) {
    current = stderrLogger;
    return;
  }
  if (typeof logger !== 'object' && typeof logger !== 'function') {
    throw new TypeError('setLogger: expected an object with debug/info/warn/error methods');
  }
  for (const m of ['debug', 'info', 'warn', 'error']) {
    if (typeof logger[m] !== 'function') {
      throw new TypeError(`setLogger: the logger has no ${m}() method`);
    }
  }
  current = logger;
}

function methodFor(level) {
  if (level >= LEVEL_ERROR) return 'error';
  if (level >= LEVEL_WARN) return 'warn';
  if (level >= LEVEL_INFO) return 'info';
  return 'debug';
}

// A logger that throws must not break the profiler (or the app calling us).
function log(level, message) {
  try {
    current[methodFor(level)](message);
  } catch (_) {
    /* ignored: nothing better to do with a broken logger */
  }
}

module.exports = {
  LEVEL_DEBUG, LEVEL_INFO, LEVEL_WARN, LEVEL_ERROR,
  setLogger, log,
  debug: (m) => log(LEVEL_DEBUG, m),
  info: (m) => log(LEVEL_INFO, m),
  warn: (m) => log(LEVEL_WARN, m),
  error: (m) => log(LEVEL_ERROR, m),
};
