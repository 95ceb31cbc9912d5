'use strict';
// The anchor's pull endpoints for express and fastify:
//   GET /debug/pprof/profile?seconds=N  -> a wall profile of the next N seconds
//   GET /debug/pprof/heap               -> the sampled live heap
// both as gzipped pprof. Unlike the anchor, collecting here never stops or restarts the
// continuous profiler: each request uses its own in-process inspector session (V8 runs
// several CPU profiles at once). pprof is written with the `pprof-format` library.
// Runs on the main JS thread.

const inspector = require('inspector');
const zlib = require('zlib');
const { promisify } = require('util');
const logger = require('./logger');

const gzip = promisify(zlib.gzip);
const DEFAULT_INTERVAL_MICROS = 10000;
const MAX_SECONDS = 300;

// What the endpoints need from init(): the frame mapper and heap options, if any.
let currentOptions = () => undefined;
function useOptions(getter) {
  currentOptions = getter;
}

function post(session, method, params) {
  return new Promise((resolve, reject) => {
    session.post(method, params || {}, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

// Builds a pprof Profile from frames keyed by V8 node; one location per distinct frame.
class ProfileBuilder {
  constructor(pprof, mapFrame) {
    this.pprof = pprof;
    this.strings = new pprof.StringTable();
    this.mapFrame = mapFrame;
    this.functions = [];
    this.locations = [];
    this.byFrame = new Map(); // "name\0file\0line" -> location id
  }

  locationOf(callFrame) {
    const raw = {
      name: callFrame.functionName || '(anonymous)',
      file: callFrame.url || '',
      line: callFrame.lineNumber + 1, // the inspector's lines and columns are 0-based
      column: callFrame.columnNumber + 1,
    };
    let f = raw;
    if (this.mapFrame) {
      try { f = this.mapFrame(raw) || raw; } catch (_) { f = raw; }
    }
    const key = `${f.name}\0${f.file}\0${f.line}`;
    let id = this.byFrame.get(key);
    if (id === undefined) {
      id = this.locations.length + 1;
      this.functions.push(new this.pprof.Function({
        id, name: this.strings.dedup(f.name), systemName: this.strings.dedup(f.name),
        filename: this.strings.dedup(f.file), startLine: f.line,
      }));
      this.locations.push(new this.pprof.Location({
        id, line: [new this.pprof.Line({ functionId: id, line: f.line })],
      }));
      this.byFrame.set(key, id);
    }
    return id;
  }

  profile(fields) {
    const vt = (type, unit) => new this.pprof.ValueType({
      type: this.strings.dedup(type), unit: this.strings.dedup(unit),
    });
    return new this.pprof.Profile({
      sampleType: fields.sampleType.map(([t, u]) => vt(t, u)),
      periodType: vt(fields.periodType[0], fields.periodType[1]),
      period: fields.period,
      sample: fields.samples.map(([locationId, value]) => new this.pprof.Sample({ locationId, value })),
      location: this.locations,
      function: this.functions,
      stringTable: this.strings,
      timeNanos: fields.timeNanos,
      durationNanos: fields.durationNanos,
    });
  }
}

function loadPprof() {
  try {
    return require('pprof-format');
  } catch (e) {
    const err = new Error('the /debug/pprof endpoints need the pprof-format package ' +
      '(npm install pprof-format)');
    logger.warn(err.message);
    throw err;
  }
}

// V8 CPU profile (nodes with parent links through children) -> pprof of wall time.
function cpuProfileToPprof(cpu, intervalMicros, mapFrame) {
  const b = new ProfileBuilder(loadPprof(), mapFrame);
  const parent = new Map();
  const byId = new Map();
  for (const n of cpu.nodes) {
    byId.set(n.id, n);
    for (const c of n.children || []) parent.set(c, n.id);
  }
  const counts = new Map();
  for (const id of cpu.samples || []) counts.set(id, (counts.get(id) || 0) + 1);
  const periodNs = intervalMicros * 1000;
  const samples = [];
  for (const [id, count] of counts) {
    const stack = [];
    for (let n = id; n !== undefined; n = parent.get(n)) {
      const node = byId.get(n);
      if (node.callFrame.functionName === '(root)') break;
      stack.push(b.locationOf(node.callFrame));
    }
    samples.push([stack, [count, count * periodNs]]);
  }
  // The anchor's pull profiles keep @datadog/pprof's names (`sample`, `objects`,
  // `space`); it renamed them only in pushed profiles. Scrapers (Alloy) send these
  // names on as the series' profile type, so dashboards on pulled data use them.
  return b.profile({
    sampleType: [['sample', 'count'], ['wall', 'nanoseconds']],
    periodType: ['wall', 'nanoseconds'],
    period: periodNs,
    samples,
    timeNanos: Date.now() * 1e6 - (cpu.endTime - cpu.startTime) * 1000,
    durationNanos: (cpu.endTime - cpu.startTime) * 1000,
  });
}

// V8 sampling heap profile (a call tree with self sizes) -> pprof of live objects/bytes.
function heapProfileToPprof(heap, intervalBytes, mapFrame) {
  const b = new ProfileBuilder(loadPprof(), mapFrame);
  const counts = new Map(); // node id -> [objects, bytes]
  for (const s of heap.samples || []) {
    const c = counts.get(s.nodeId) || [0, 0];
    c[0] += 1;
    c[1] += s.size;
    counts.set(s.nodeId, c);
  }
  const samples = [];
  const walk = (node, stack) => {
    const here = node.callFrame.functionName === '(root)' ? stack
      : [b.locationOf(node.callFrame), ...stack];
    const c = counts.get(node.id);
    if (c) samples.push([here, c]);
    for (const child of node.children || []) walk(child, here);
  };
  walk(heap.head, []);
  return b.profile({
    sampleType: [['objects', 'count'], ['space', 'bytes']],
    periodType: ['space', 'bytes'],
    period: intervalBytes,
    samples,
    timeNanos: Date.now() * 1e6,
    durationNanos: 0,
  });
}

async function collectWall(seconds) {
  const opts = currentOptions() || {};
  const intervalMicros = (opts.wall && opts.wall.samplingIntervalMicros) || DEFAULT_INTERVAL_MICROS;
  const session = new inspector.Session();
  session.connect();
  try {
    await post(session, 'Profiler.enable');
    await post(session, 'Profiler.setSamplingInterval', { interval: intervalMicros });
    await post(session, 'Profiler.start');
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000).unref());
    const { profile } = await post(session, 'Profiler.stop');
    return gzip(cpuProfileToPprof(profile, intervalMicros, opts.mapFrame).encode());
  } finally {
    session.disconnect();
  }
}

async function collectHeap() {
  const opts = currentOptions() || {};
  const heap = opts.heap || {};
  const intervalBytes = heap.samplingIntervalBytes || 524288;
  const session = new inspector.Session();
  session.connect();
  try {
    // The sampling heap profiler is per isolate: when the continuous heap profiler runs,
    // this reads its samples; otherwise it starts one for the read (nearly empty, as in
    // the anchor) and stops it again.
    const running = Boolean(opts.heapRunning && opts.heapRunning());
    // With heap.allocations the running profile keeps collected objects too: not in-use.
    if (running && heap.allocations) {
      throw new Error('the heap profiler records allocations (heap.allocations): no in-use heap to pull');
    }
    if (!running) {
      await post(session, 'HeapProfiler.startSampling', { samplingInterval: intervalBytes });
    }
    const { profile } = await post(session, 'HeapProfiler.getSamplingProfile');
    if (!running) await post(session, 'HeapProfiler.stopSampling');
    return gzip(heapProfileToPprof(profile, intervalBytes, opts.mapFrame).encode());
  } finally {
    session.disconnect();
  }
}

function parseSeconds(raw) {
  const s = raw === undefined || raw === '' ? 1 : Number(raw);
  if (!Number.isFinite(s) || s < 0 || s > MAX_SECONDS) {
    throw new RangeError(`seconds must be a number from 0 to ${MAX_SECONDS}`);
  }
  return s;
}

function expressMiddleware() {
  const handle = async (what, collect, res) => {
    logger.debug(`Fetching ${what} profile`);
    try {
      const body = await collect();
      res.status(200).send(body);
    } catch (e) {
      logger.debug(`Error collecting ${what} profile: ${e && e.message}`);
      res.sendStatus(e instanceof RangeError ? 400 : 500);
    }
  };
  return (req, res, next) => {
    if (req.method === 'GET') {
      if (req.path === '/debug/pprof/heap') return handle('heap', collectHeap, res);
      if (req.path === '/debug/pprof/profile') {
        return handle('wall', () => collectWall(parseSeconds(req.query && req.query.seconds)), res);
      }
    }
    return next();
  };
}

function fastifyMiddleware() {
  const handle = async (what, collect, reply) => {
    logger.debug(`Fetching ${what} profile`);
    try {
      const body = await collect();
      return reply.status(200).type('application/octet-stream').send(body);
    } catch (e) {
      logger.debug(`Error collecting ${what} profile: ${e && e.message}`);
      const bad = e instanceof RangeError;
      return reply.status(bad ? 400 : 500).send({ error: bad ? e.message : 'Internal Server Error' });
    }
  };
  return (fastify, _options, done) => {
    fastify.get('/debug/pprof/heap', (request, reply) => handle('heap', collectHeap, reply));
    fastify.get('/debug/pprof/profile', (request, reply) =>
      handle('wall', () => collectWall(parseSeconds(request.query && request.query.seconds)), reply));
    done();
  };
}

module.exports = {
  expressMiddleware, fastifyMiddleware, useOptions, cpuProfileToPprof, heapProfileToPprof,
};
