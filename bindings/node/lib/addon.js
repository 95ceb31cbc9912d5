'use strict';
// Loads the compiled addon. The addon is process-wide (one agent, one
// SIGPROF chain for the main thread), so its init refuses worker threads
// (ERR_PYROSCOPE_WORKER, thrown as is).
const path = require('path');

const root = path.join(__dirname, '..', '..', '..');
let addon;
let firstError;
for (const dir of ['Release', 'Debug']) {
  try {
    addon = require(path.join(root, 'build', dir, 'pyroscope_native.node'));
    break;
  } catch (e) {
    if (e && e.code === 'ERR_PYROSCOPE_WORKER') throw e;
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
