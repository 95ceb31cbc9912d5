'use strict';
// Workload for tests/servers (see app.py): the main thread burns 2:1 under
// worker=a / worker=b, the smaller part inside a real OpenTelemetry root
// span; settings from the environment. Prints one JSON line.
//
//   node --expose-gc app.js UNIT APP     the CPU workload
//   node --expose-gc app.js memory APP   the memory workload: churnArrays makes and drops
//     arrays, keepArrays keeps KEEP arrays alive until stop() (one period: its heap
//     snapshot holds them); the truth is V8's used-heap delta of the kept ones. V8's heap
//     samples carry no labels or spans, so none are set here. Node 26+ with
//     PYROSCOPE_HEAP_ALLOCATIONS=true profiles what both allocated instead.
const fs = require('fs');
const path = require('path');
const otel = require('@opentelemetry/api');
const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const Pyroscope = require(path.join(__dirname, '..', '..', '..'));

const v8 = require('v8');

// This thread's CPU, ns (the main thread: the one Node's profiler samples).
function threadCpu() {
  return Number(fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]);
}

function burn_a(ns, out) {
  const t = threadCpu();
  while (threadCpu() - t < ns) { for (let i = 0; i < 2e4; i++); }
  out.a += threadCpu() - t;
}

function burn_b(ns, out) {
  const t = threadCpu();
  while (threadCpu() - t < ns) { for (let i = 0; i < 2e4; i++); }
  out.b += threadCpu() - t;
}

async function cpuWorkload(tracer, out) {
  const unit = Number(process.argv[2]) * 1e9;
  out.a = 0;
  out.b = 0;
  // Slices of 50 ms each, interleaved, so both see the same conditions.
  // One root span holds all of b's slices.
  const slice = 50e6;
  const span = tracer.startSpan('burn-b-root');
  const inSpan = otel.trace.setSpan(otel.context.active(), span);
  for (let done = 0; done < unit; done += slice) {
    Pyroscope.wrapWithLabels({ worker: 'a' }, () => burn_a(2 * slice, out));
    otel.context.with(inSpan, () => Pyroscope.wrapWithLabels({ worker: 'b' }, () => burn_b(slice, out)));
    await new Promise((r) => setImmediate(r));
  }
  span.end();
  out.span_id = span.spanContext().spanId;
  out.trace_id = span.spanContext().traceId;
}

const CHURN = 400000; // ~70 MiB made and dropped
const KEEP = 200000; // ~35 MiB kept

// into a holder made before (its growth is no allocation of the kept objects)
function keepArrays(holder) {
  for (let i = 0; i < holder.length; i++) holder[i] = new Array(16).fill(i);
}

// a ring of 1024 keeps them from being optimised away
function churnArrays(n) {
  const ring = new Array(1024);
  for (let i = 0; i < n; i++) ring[i & 1023] = new Array(16).fill(i);
  return ring.length;
}

function memoryWorkload(out) {
  const used = () => { gc(); gc(); return v8.getHeapStatistics().used_heap_size; };
  churnArrays(CHURN);
  globalThis.kept = new Array(KEEP).fill(null);
  const before = used();
  keepArrays(globalThis.kept);
  out.keep_bytes = used() - before;
  // the churned arrays are of the same shape: as many bytes each (Node 26's
  // allocation profile counts them)
  out.churn_bytes = Math.round((out.keep_bytes * CHURN) / KEEP);
}

async function main() {
  otel.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const provider = new BasicTracerProvider({ spanProcessors: [new Pyroscope.PyroscopeSpanProcessor()] });
  otel.trace.setGlobalTracerProvider(provider);
  const tracer = otel.trace.getTracer('servers');
  Pyroscope.init({ appName: process.argv[3] });
  Pyroscope.start();
  const out = {};
  if (process.argv[2] === 'memory') memoryWorkload(out);
  else await cpuWorkload(tracer, out);
  await Pyroscope.stop();
  out.stats = Pyroscope.stats();
  await provider.shutdown();
  console.log(JSON.stringify(out));
}
main().catch((e) => { console.error(e); process.exit(1); });
