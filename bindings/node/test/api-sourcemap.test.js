'use strict';
// SourceMapper (the anchor's API) on a tiny compiled TypeScript file and its .map, the
// frame naming handed to the native profiler, stripFilenames and shortenPaths.
const assert = require('assert');
const fs = require('fs');
const path = require('path');
const { SourceMapper, frameMapper } = require('../lib/sourcemapper');
const { tmpdir } = require('./api-helpers');

const FIXTURE = path.join(__dirname, 'fixtures', 'sourcemap');
const GENERATED = path.join(FIXTURE, 'dist', 'work.js');
const SOURCE = path.join(FIXTURE, 'src', 'work.ts');

describe('api SourceMapper', () => {
  let mapper;
  before(async () => {
    mapper = await SourceMapper.create([FIXTURE]);
  });

  it('finds the .map of the compiled file', () => {
    assert.ok(mapper.hasMappingInfo(GENERATED));
    assert.ok(!mapper.hasMappingInfo(SOURCE));
  });

  it('maps a generated position to the TypeScript source (1-based lines and columns)', () => {
    const loc = mapper.mappingInfo({ file: GENERATED, line: 4, column: 10, name: 'spinTyped' });
    assert.strictEqual(loc.file, SOURCE);
    assert.strictEqual(loc.line, 6);
    assert.strictEqual(loc.name, 'spinTyped');
    const body = mapper.mappingInfo({ file: GENERATED, line: 7, column: 1, name: 'x' });
    assert.strictEqual(body.line, 9);
  });

  it('returns the location itself for an unmapped file', () => {
    const loc = { file: __filename, line: 3, column: 1, name: 'f' };
    assert.strictEqual(mapper.mappingInfo(loc), loc);
  });

  it('reads inline base64 maps from .js files', async () => {
    const dir = tmpdir('pn-inline-');
    const map = fs.readFileSync(GENERATED + '.map');
    const js = fs.readFileSync(GENERATED, 'utf8').replace(/\/\/# sourceMappingURL=.*/,
      `//# sourceMappingURL=data:application/json;base64,${map.toString('base64')}`);
    fs.writeFileSync(path.join(dir, 'inline.js'), js);
    const m = await SourceMapper.create([dir]);
    const loc = m.mappingInfo({ file: path.join(dir, 'inline.js'), line: 5, column: 1, name: 'y' });
    assert.strictEqual(loc.line, 7);
    assert.strictEqual(path.basename(loc.file), 'work.ts');
  });

  it('create() rejects a map it cannot parse, naming the file', async () => {
    const dir = tmpdir('pn-badmap-');
    fs.writeFileSync(path.join(dir, 'x.js.map'), '{not json');
    await assert.rejects(SourceMapper.create([dir]), /x\.js\.map/);
  });
});

describe('api frame mapper', () => {
  it('names frames as the anchor does: path relative to cwd, function, line', () => {
    const map = frameMapper({ cwd: '/app' });
    assert.deepStrictEqual(map({ name: 'handler', file: '/app/src/a.js', line: 12, column: 3 }),
      { name: './src/a.js:handler:12', file: '/app/src/a.js', line: 12 });
    assert.deepStrictEqual(map({ name: '', file: 'file:///app/b.mjs', line: 2, column: 1 }),
      { name: './b.mjs:(anonymous):2', file: '/app/b.mjs', line: 2 });
    // only a leading working directory is shortened (the anchor replaced it anywhere)
    assert.strictEqual(map({ name: 'f', file: '/srv/app/x.js', line: 1, column: 1 }).name, '/srv/app/x.js:f:1');
    assert.strictEqual(frameMapper({ cwd: '/' })({ name: 'f', file: '/app/x.js', line: 1, column: 1 }).name, './app/x.js:f:1');
    // V8's own frames keep their names
    assert.strictEqual(map({ name: '(garbage collector)', file: '', line: 0, column: 0 }).name, '(garbage collector)');
  });

  it('applies the source map first', async () => {
    const mapper = await SourceMapper.create([FIXTURE]);
    const map = frameMapper({ sourceMapper: mapper, cwd: FIXTURE });
    const f = map({ name: 'spinTyped', file: GENERATED, line: 4, column: 10 });
    assert.deepStrictEqual(f, { name: './src/work.ts:spinTyped:6', file: SOURCE, line: 6 });
  });

  it('shortenPaths keeps the path inside the innermost package; stripFilenames drops files', () => {
    const frame = { name: 'get', file: '/app/node_modules/a/node_modules/b/lib/x.js', line: 5, column: 1 };
    assert.strictEqual(frameMapper({ cwd: '/app', shortenPaths: true })(frame).name, 'b/lib/x.js:get:5');
    assert.strictEqual(frameMapper({ cwd: '/app' })(frame).name, './node_modules/a/node_modules/b/lib/x.js:get:5');
    const deps = frameMapper({ cwd: '/app', stripFilenames: 'dependencies' });
    assert.strictEqual(deps(frame).file, '');
    assert.strictEqual(deps({ name: 'h', file: '/app/a.js', line: 1, column: 1 }).file, '/app/a.js');
    assert.strictEqual(frameMapper({ cwd: '/app', stripFilenames: 'all' })({ name: 'h', file: '/app/a.js', line: 1, column: 1 }).file, '');
  });

  it('a source mapper that throws leaves the frame unmapped', () => {
    const map = frameMapper({ cwd: '/app', sourceMapper: { mappingInfo() { throw new Error('boom'); } } });
    assert.strictEqual(map({ name: 'f', file: '/app/a.js', line: 1, column: 1 }).name, './a.js:f:1');
  });
});
