'use strict';
// The README's Node.js snippets run as pasted: each ```js block is taken from
// README.md itself (so the two cannot drift) and run with node in an empty
// folder where require('pyroscope-native') finds this package.
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const BLOCKS = [...README.matchAll(/^```js\n([\s\S]*?)^```/gm)].map((m) => m[1]);

describe('README Node.js snippets', function () {
  this.timeout(120000);

  it('has at least one', () => assert.ok(BLOCKS.length >= 1));

  BLOCKS.forEach((code, n) => {
    it(`block ${n + 1} runs as pasted`, () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pn-readme-'));
      try {
        fs.mkdirSync(path.join(dir, 'node_modules'));
        fs.symlinkSync(ROOT, path.join(dir, 'node_modules', 'pyroscope-native'), 'dir');
        fs.writeFileSync(path.join(dir, 'snippet.js'), code);
        const env = Object.fromEntries(Object.entries(process.env)
          .filter(([k]) => !k.startsWith('PYROSCOPE_') && !k.startsWith('OTEL_')));
        execFileSync(process.execPath, ['snippet.js'], { cwd: dir, env, timeout: 100000, stdio: 'pipe' });
        const out = /outputDir: '([^']+)'/.exec(code);
        if (out) {
          const files = fs.readdirSync(path.join(dir, out[1]));
          assert.ok(files.some((f) => f.endsWith('.pb.gz')), `no profiles in ${out[1]}: ${files}`);
        }
      } catch (e) {
        throw new Error(`block ${n + 1} failed: ${e.message}\n${e.stderr || ''}`);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
