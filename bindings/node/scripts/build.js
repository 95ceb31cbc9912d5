'use strict';
// `npm install` / `npm ci` entry: the prebuilt addon when one fits, else
// node-gyp rebuild of binding.gyp, offline.
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
// node-gyp runs in bindings/node (binding.gyp's folder): its build/ must
// not be the repository's CMake build/, which `rebuild` would delete.
const root = path.join(__dirname, '..');
// binding.gyp lists the sources when configured: a folder that gained or lost a
// file since, or a newer binding.gyp or core/sources.txt (mtimes), needs a full rebuild.
function configuredAfterSources() {
  let made;
  try {
    made = fs.statSync(path.join(root, 'build', 'Makefile')).mtimeMs;
  } catch (_) {
    return false;
  }
  const core = path.join(root, '..', '..', 'core');
  const dirs = [path.join(root, 'src'), path.join(root, 'binding.gyp'), path.join(core, 'sources.txt')];
  return dirs.every((d) => !fs.existsSync(d) || fs.statSync(d).mtimeMs <= made);
}
// `npm install /path/to/checkout` links the folder (npm's install-links is
// off) and never installs the package's own dependencies: the addon loader
// (node-gyp-build) and the pull endpoints (pprof-format) would not be found
// from the checkout. Install the missing ones into it, production only,
// from package-lock.json (and without scripts: this one is running).
function ensureOwnDependencies() {
  const pkgDir = path.join(root, '..', '..');
  let pkg;
  try {
    pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
  } catch (_) {
    return;
  }
  const missing = Object.keys(pkg.dependencies || {}).filter((d) => {
    try {
      require.resolve(d + '/package.json', { paths: [pkgDir] });
      return false;
    } catch (_) {
      return true;
    }
  });
  if (!missing.length) return;
  console.error('pyroscope-native: installing its dependencies into ' + pkgDir + ' (' + missing.join(', ') +
    '): npm links a folder without them');
  const npm = process.env.npm_execpath;
  const cmd = npm ? process.execPath : 'npm';
  const lock = fs.existsSync(path.join(pkgDir, 'package-lock.json'));
  const args = [...(npm ? [npm] : []), lock ? 'ci' : 'install', '--omit=dev', '--omit=peer',
    '--ignore-scripts', '--no-audit', '--no-fund', ...(lock ? [] : ['--no-save'])];
  const r = spawnSync(cmd, args, { cwd: pkgDir, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error('pyroscope-native: installing ' + missing.join(', ') + ' failed; run `npm install --omit=dev` in ' +
      pkgDir + ' (or install with `npm install --install-links ' + pkgDir + '`)');
    process.exit(1);
  }
}
if (!process.argv.includes('--incremental')) ensureOwnDependencies();

// The npm tarball carries prebuilt addons (prebuilds/, glibc 2.17+): where
// one fits this platform and CPU, nothing is compiled, unless asked
// (`npm install --build-from-source`, or make build-node's --incremental).
if (!process.argv.includes('--incremental') &&
    !/^(true|1)$/.test(process.env.npm_config_build_from_source || '')) {
  let found = null;
  try {
    found = require('node-gyp-build').path(root);
  } catch (_) { /* none fits: build below */ }
  if (found && found.split(path.sep).includes('prebuilds')) process.exit(0);
}
const incremental = process.argv.includes('--incremental') && configuredAfterSources();
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
