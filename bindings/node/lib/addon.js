'use strict';
// Loads the compiled addon. The addon is process-wide (one agent, one
// SIGPROF chain for the main thread), so it is refused on worker threads.
const path = require('path');
const { isMainThread } = require('worker_threads');

if (!isMainThread) {
  const err = new Error('pyroscope-native profiles the main thread of a process and cannot be ' +
    'loaded in a worker thread: require it (and start it) from the main thread');
  err.code = 'ERR_PYROSCOPE_WORKER';
  throw err;
}

const root = path.join(__dirname, '..', '..', '..');
let addon;
let firstError;
for (const dir of ['Release', 'Debug']) {
  try {
    addon = require(path.join(root, 'build', dir, 'pyroscope_native.node'));
    break;
  } catch (e) {
    if (!firstError) firstError = e;
  }
}
if (!addon) {
  const err = new Error('pyroscope-native: the native addon is not built (' +
    (firstError && firstError.message) + '). Build it with `npm install` (or `npm ci`, or ' +
    '`make build-node`) in ' + root);
  err.code = 'ERR_PYROSCOPE_NOT_BUILT';
  throw err;
}
module.exports = addon;
