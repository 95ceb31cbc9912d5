// The aarch64 smoke test's Node app (tests/dist/smoke.py): profiles a busy
// loop of 2 s of CPU, labelled, into the folder argv[2].
'use strict';
const Pyroscope = require('pyroscope-native');

console.log(require('node-gyp-build').path(require('node:path').join(
  require.resolve('pyroscope-native'), '../..')));
Pyroscope.init({ appName: 'smoke', outputDir: process.argv[2], uploadInterval: '1s' });
Pyroscope.start();
Pyroscope.wrapWithLabels({ endpoint: '/smoke' }, () => {
  const end = process.cpuUsage().user + 2e6;
  while (process.cpuUsage().user < end);
});
Pyroscope.stop().then(() => console.log('stopped'));
