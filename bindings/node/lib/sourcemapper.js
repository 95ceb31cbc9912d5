'use strict';
// Source maps for transpiled code (the anchor's SourceMapper API: create(searchDirs),
// hasMappingInfo(file), mappingInfo({file, line, column, name})) and the frame mapper
// handed to native.startProfiler as `mapFrame` (source map, then the anchor's frame
// naming "path:function:line", shortenPaths and stripFilenames).
// Everything here runs on the main JS thread.

const fs = require('fs');
const path = require('path');
const { fileURLToPath } = require('url');
const logger = require('./logger');

const MAP_FILE = /\.[cm]?js\.map$/;
const SOURCE_FILE = /\.[cm]?js$/;
const INLINE_MAP = /\/\/# sourceMappingURL=data:application\/json;(?:charset=[^;,]+;)?base64,([A-Za-z0-9+/=]+)/;
const SKIP_DIRS = new Set(['.git', 'node_modules']);
const NON_FATAL = new Set(['ENOENT', 'EPERM', 'EACCES', 'ELOOP']);
const READ_CONCURRENCY = 10;

let sourceMapLib; // loaded on first use: only apps with source maps pay for it
function sourceMap() {
  if (!sourceMapLib) sourceMapLib = require('source-map');
  return sourceMapLib;
}

// Files under dir matching re, skipping .git, node_modules and /proc.
async function listFiles(dir, re, out) {
  let handle;
  try {
    handle = await fs.promises.opendir(dir);
  } catch (e) {
    if (NON_FATAL.has(e.code)) return out;
    throw e;
  }
  for await (const ent of handle) {
    const full = path.join(dir, ent.name);
    if (ent.isDirectory()) {
      if (!SKIP_DIRS.has(ent.name) && full !== '/proc') await listFiles(full, re, out);
    } else if (ent.isFile() && re.test(ent.name)) {
      out.push(full);
    }
  }
  return out;
}

// Runs fn over items, at most `limit` at a time.
async function eachLimited(items, limit, fn) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

async function exists(p) {
  try {
    await fs.promises.access(p, fs.constants.F_OK);
    return true;
  } catch (_) {
    return false;
  }
}

class SourceMapper {
  /**
   * Reads every *.js.map file (and every *.js file with an inline base64 map) under
   * searchDirs and resolves to a SourceMapper.
   */
  static async create(searchDirs, debug = false) {
    if (!Array.isArray(searchDirs)) {
      throw new TypeError('SourceMapper.create: searchDirs must be an array of folders');
    }
    const mapper = new SourceMapper(debug);
    const files = [];
    for (const dir of searchDirs) {
      try {
        await listFiles(path.resolve(dir), MAP_FILE, files);
        await listFiles(path.resolve(dir), SOURCE_FILE, files);
      } catch (e) {
        throw new Error(`failed to get source maps from ${dir}: ${e.message}`);
      }
    }
    if (debug) logger.debug(`source maps: ${files.length} candidate files`);
    await eachLimited(files, READ_CONCURRENCY, (f) => mapper._load(f));
    return mapper;
  }

  constructor(debug = false) {
    this.infoMap = new Map(); // generated file (absolute) -> { mapFileDir, mapConsumer }
    this.debug = debug;
  }

  async _load(file) {
    let text;
    try {
      text = await fs.promises.readFile(file, 'utf8');
    } catch (e) {
      throw new Error(`could not read source map file ${file}: ${e.message}`);
    }
    if (!MAP_FILE.test(file)) {
      const m = INLINE_MAP.exec(text);
      if (!m) return;
      text = Buffer.from(m[1], 'base64').toString('utf8');
    }
    let consumer;
    try {
      consumer = await new (sourceMap().SourceMapConsumer)(text);
    } catch (e) {
      throw new Error(`could not parse the source map in ${file}: ${e.message}`);
    }
    const dir = path.dirname(file);
    // The generated file: the map's `file` (relative to the map), else the map's own
    // name without .map (bundlers often get `file` wrong in subfolders), else the
    // source file itself for an inline map.
    const candidates = [];
    if (!MAP_FILE.test(file)) candidates.push(file);
    else {
      if (consumer.file) candidates.push(path.resolve(dir, consumer.file));
      candidates.push(path.resolve(dir, path.basename(file, '.map')));
    }
    for (const generated of candidates) {
      if (await exists(generated)) {
        this.infoMap.set(generated, { mapFileDir: dir, mapConsumer: consumer });
        if (this.debug) logger.debug(`source map for ${generated}: ${file}`);
        return;
      }
    }
    if (this.debug) logger.debug(`source map ${file}: no generated file found`);
  }

  hasMappingInfo(inputPath) {
    return this.infoMap.has(path.normalize(inputPath));
  }

  /**
   * location: { file, line (1-based), column (1-based), name }. Returns the original
   * { file, line, column (1-based), name }, or `location` itself when unmapped.
   */
  mappingInfo(location) {
    const entry = this.infoMap.get(path.normalize(location.file));
    if (!entry) return location;
    const pos = entry.mapConsumer.originalPositionFor({
      line: location.line,
      column: location.column > 0 ? location.column - 1 : 0,
    });
    if (pos.source === null) {
      if (this.debug) logger.debug(`source map: no position for ${location.file}:${location.line}`);
      return location;
    }
    return {
      file: path.resolve(entry.mapFileDir, pos.source),
      line: pos.line || undefined,
      name: pos.name || location.name,
      column: pos.column === null ? undefined : pos.column + 1,
    };
  }
}

// The path inside the innermost node_modules package, or undefined.
function packageRelativePath(file) {
  const i = Math.max(file.lastIndexOf('node_modules/'), file.lastIndexOf('node_modules\\'));
  return i < 0 ? undefined : file.slice(i + 'node_modules/'.length);
}

function isDependency(file) {
  return file.includes('node_modules/') || file.includes('node_modules\\');
}

const CACHE_LIMIT = 20000; // distinct frames remembered; cleared (not grown) past it

/**
 * opts: { sourceMapper, stripFilenames ('all' | 'dependencies'), shortenPaths, cwd }.
 * Returns mapFrame({name, file, line, column}) -> {name, file, line}: the anchor's
 * names ("./src/app.js:handler:12", V8's own frames such as "(garbage collector)"
 * unchanged), the source-mapped position first.
 */
function frameMapper(opts = {}) {
  const cwd = opts.cwd || process.cwd();
  const cwdPrefix = cwd.endsWith(path.sep) ? cwd : cwd + path.sep;
  // "./src/a.js" for files under the working directory; other paths stay absolute.
  const relative = (file) => (file.startsWith(cwdPrefix) ? `./${file.slice(cwdPrefix.length)}` : file);
  const cache = new Map();
  return function mapFrame(frame) {
    const key = `${frame.file}\0${frame.name}\0${frame.line}\0${frame.column}`;
    let out = cache.get(key);
    if (out !== undefined) return out;
    let name = frame.name || '(anonymous)';
    let file = frame.file || '';
    let line = frame.line || 0;
    if (file.startsWith('file://')) {
      try { file = fileURLToPath(file); } catch (_) { /* keep the URL */ }
    }
    if (opts.sourceMapper && file) {
      try {
        const m = opts.sourceMapper.mappingInfo({ file, line, column: frame.column || 0, name });
        if (m && m !== frame) {
          if (m.file) file = m.file;
          if (m.line) line = m.line;
          if (m.name) name = m.name;
        }
      } catch (e) {
        logger.debug(`source map lookup failed for ${file}: ${e.message}`);
      }
    }
    if (file && (!name.includes(':') || name.startsWith('(anonymous'))) {
      const shown = (opts.shortenPaths && packageRelativePath(file)) || relative(file);
      name = `${shown}:${name}:${line}`;
    }
    if (opts.stripFilenames === 'all' || (opts.stripFilenames === 'dependencies' && isDependency(file))) {
      file = '';
    }
    out = { name, file, line };
    if (cache.size >= CACHE_LIMIT) cache.clear();
    cache.set(key, out);
    return out;
  };
}

module.exports = { SourceMapper, frameMapper, packageRelativePath };
