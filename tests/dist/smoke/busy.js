// The aarch64 smoke test's Node app (tests/dist/smoke.py): profiles 2 s of
// CPU in busy(), labelled, into the folder argv[2]. Prints the addon file
// it loaded.
'use strict';
const Pyroscope = require('pyroscope-native');

function busy(seconds) {
  const end = process.cpuUsage().user + seconds * 1e6;
  for (let x = 0; process.cpuUsage().user < end;) for (let i = 0; i < 1e5; i++) x += i;
}

Pyroscope.init({ appName: 'smoke', outputDir: process.argv[2], uploadInterval: '1s' });
Pyroscope.start();
// The addon file node-gyp-build chose, as loaded.
console.log(Object.keys(require.cache).find((f) => f.endsWith('.node')));
Pyroscope.wrapWithLabels({ endpoint: '/smoke' }, busy, 2);
Pyroscope.stop().then(() => console.log('stopped'));
