// ESM entry: `import Pyroscope, { wrapWithLabels } from 'pyroscope-native'`.
// One implementation: the CommonJS module, so ESM and CJS users share one profiler state.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const api = require('./index.js');

export default api;
export const {
  SourceMapper,
  expressMiddleware,
  fastifyMiddleware,
  init,
  getWallLabels,
  setWallLabels,
  getLabels,
  setLabels,
  wrapWithLabels,
  start,
  startHeapProfiling,
  startWallProfiling,
  startCpuProfiling,
  stop,
  stopHeapProfiling,
  stopWallProfiling,
  stopCpuProfiling,
  setLogger,
  flush,
  stats,
  isRunning,
  PyroscopeSpanProcessor,
} = api;

