'use strict';
// `npm install` / `npm ci` entry: node-gyp rebuild of binding.gyp, offline.
// node-gyp downloads Node's headers unless told where they are; a Debian or
// distro Node keeps complete headers under <prefix>/include/node, so pass
// that prefix as --nodedir when it has them.
const { spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');

function nodeGyp() {
  if (process.env.npm_config_node_gyp) return process.env.npm_config_node_gyp;
  try {
    return require.resolve('node-gyp/bin/node-gyp.js');
  } catch (_) {
    const npmDir = path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm');
    return path.join(npmDir, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
  }
}

function localNodeDir() {
  const prefix = process.config.variables.node_prefix || path.join(path.dirname(process.execPath), '..');
  for (const dir of [prefix, path.join(path.dirname(process.execPath), '..')]) {
    if (fs.existsSync(path.join(dir, 'include', 'node', 'node_api.h')) &&
        fs.existsSync(path.join(dir, 'include', 'node', 'common.gypi'))) return dir;
  }
  return null;
}

// --incremental (make build-node): reuse build/ when it was configured,
// so only changed sources compile.
const root = path.join(__dirname, '..', '..', '..');
const incremental = process.argv.includes('--incremental') &&
  fs.existsSync(path.join(root, 'build', 'Makefile'));
const args = [nodeGyp(), incremental ? 'build' : 'rebuild'];
const nodedir = process.env.npm_config_nodedir || localNodeDir();
if (nodedir) args.push('--nodedir=' + nodedir);
if (process.env.PYROSCOPE_NODE_JOBS) args.push('-j', process.env.PYROSCOPE_NODE_JOBS);
const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
if (r.error) {
  console.error('pyroscope-native: cannot run node-gyp: ' + r.error.message);
  process.exit(1);
}
process.exit(r.status === null ? 1 : r.status);
