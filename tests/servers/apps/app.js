'use strict';
// Workload for tests/servers (see app.py): the main thread burns 2:1 under
// worker=a / worker=b, the smaller part inside a real OpenTelemetry root
// span; settings from the environment. Prints one JSON line.
const fs = require('fs');
const path = require('path');
const otel = require('@opentelemetry/api');
const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const Pyroscope = require(path.join(__dirname, '..', '..', '..'));

const UNIT = Number(process.argv[2]) * 1e9;

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

async function main() {
  otel.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const provider = new BasicTracerProvider({ spanProcessors: [new Pyroscope.PyroscopeSpanProcessor()] });
  otel.trace.setGlobalTracerProvider(provider);
  const tracer = otel.trace.getTracer('servers');
  Pyroscope.init({ appName: process.argv[3] });
  Pyroscope.start();
  const out = { a: 0, b: 0 };
  // Slices of 50 ms each, interleaved, so both see the same conditions.
  // One root span holds all of b's slices.
  const slice = 50e6;
  const span = tracer.startSpan('burn-b-root');
  const inSpan = otel.trace.setSpan(otel.context.active(), span);
  for (let done = 0; done < UNIT; done += slice) {
    Pyroscope.wrapWithLabels({ worker: 'a' }, () => burn_a(2 * slice, out));
    otel.context.with(inSpan, () => Pyroscope.wrapWithLabels({ worker: 'b' }, () => burn_b(slice, out)));
    await new Promise((r) => setImmediate(r));
  }
  span.end();
  out.span_id = span.spanContext().spanId;
  out.trace_id = span.spanContext().traceId;
  await Pyroscope.stop();
  out.stats = Pyroscope.stats();
  await provider.shutdown();
  console.log(JSON.stringify(out));
}
main().catch((e) => { console.error(e); process.exit(1); });
