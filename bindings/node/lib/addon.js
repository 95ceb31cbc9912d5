'use strict';
// Loads the native addon through node-gyp-build: a local build
// (bindings/node/build/Release or Debug, from `npm install` in a checkout
// or `make build-node`) wins, else the prebuilt one for this platform, CPU
// and libc (bindings/node/prebuilds/linux-x64 and linux-arm64, glibc 2.17+,
// shipped in the npm tarball). It loads in the main thread and in worker
// threads (one agent and one SIGPROF chain for the process, src/threads.c).
const path = require('path');

const root = path.join(__dirname, '..');  // bindings/node
let file;
try {
  file = require('node-gyp-build').path(root);
} catch (e) {
  const err = new Error('pyroscope-native: no native addon for ' + process.platform + '-' +
    process.arch + ' (' + e.message + '). Build it with `npm install --build-from-source` ' +
    '(needs a C compiler and the -dev packages in the README), or `make build-node` in a checkout');
  err.code = 'ERR_PYROSCOPE_NOT_BUILT';
  throw err;
}
module.exports = require(file);
