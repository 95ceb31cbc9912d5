'use strict';
// PyroscopeSpanProcessor with the real OpenTelemetry SDK (BasicTracerProvider 2.x,
// AsyncLocalStorageContextManager): root spans get pyroscope.profile.id, concurrent
// requests' samples carry their own root's span_id across awaits and child spans.
const assert = require('assert');
const { setImmediate: tick, setTimeout: sleep } = require('timers/promises');
const { loadNative, tmpdir, decodeFolder, samplesOf, count, burn, inFunction } = require('./api-helpers');

const native = loadNative();
const api = require('../lib');

describe('api OpenTelemetry span processor', function () {
  this.timeout(60000);
  let otel, provider, exporter, processor, contextManager;
  before(function () {
    if (!native) this.skip(); // no lib/native.js in this tree (see loadNative)
    otel = require('@opentelemetry/api');
    const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
    const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
    contextManager = new AsyncLocalStorageContextManager().enable();
    otel.context.setGlobalContextManager(contextManager);
    exporter = new InMemorySpanExporter();
    processor = new api.PyroscopeSpanProcessor();
    provider = new BasicTracerProvider({ spanProcessors: [processor, new SimpleSpanProcessor(exporter)] });
    otel.trace.setGlobalTracerProvider(provider);
  });
  after(async () => {
    if (!provider) return;
    await provider.shutdown();
    otel.trace.disable();
    otel.context.disable();
  });
  beforeEach(() => exporter && exporter.reset());

  const tracer = () => otel.trace.getTracer('api-otel-test');

  it('gives local roots pyroscope.profile.id (their span id), not their children', async () => {
    await tracer().startActiveSpan('root', async (root) => {
      await tick();
      tracer().startActiveSpan('child', (child) => child.end());
      root.end();
    });
    const remoteParent = otel.trace.setSpanContext(otel.context.active(), {
      traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: 1, isRemote: true,
    });
    tracer().startSpan('from-remote', {}, remoteParent).end();
    const spans = Object.fromEntries(exporter.getFinishedSpans().map((s) => [s.name, s]));
    assert.strictEqual(spans.root.attributes['pyroscope.profile.id'], spans.root.spanContext().spanId);
    assert.match(spans.root.attributes['pyroscope.profile.id'], /^[0-9a-f]{16}$/);
    assert.strictEqual(spans.child.attributes['pyroscope.profile.id'], undefined);
    assert.strictEqual(spans['from-remote'].attributes['pyroscope.profile.id'], spans['from-remote'].spanContext().spanId);
    assert.strictEqual(processor.errors, 0);
  });

  it('labels each root\'s samples with its span_id across awaits, with concurrent requests', async () => {
    const dir = tmpdir('pn-otel-');
    api.init({ appName: 'otel.test', outputDir: dir, uploadInterval: 1 });
    api.start();
    function burnInRequestOne() { return burn(20); }
    function burnInRequestTwo() { return burn(20); }
    function burnInChild() { return burn(10); }
    const request = (name, fn) => tracer().startActiveSpan(name, async (span) => {
      for (let i = 0; i < 10; i++) {
        fn();
        await tick();
        await tracer().startActiveSpan(`${name}.child`, async (child) => {
          await sleep(1);
          burnInChild();
          child.end();
        });
      }
      span.end();
      return span.spanContext().spanId;
    });
    let ids;
    try {
      ids = await Promise.all([
        api.wrapWithLabels({ route: '/one' }, () => request('GET /one/{id}', burnInRequestOne)),
        request('GET /two', burnInRequestTwo),
      ]);
    } finally {
      await api.stop();
    }
    const samples = samplesOf(decodeFolder(dir), 'cpu');
    const check = (fn, id, other, spanName) => {
      const all = count(samples, inFunction(fn));
      const mine = count(samples, (s) => inFunction(fn)(s) && s.labels.span_id === id);
      const wrong = count(samples, (s) => inFunction(fn)(s) && s.labels.span_id === other);
      assert.ok(all > 0, `no samples in ${fn}`);
      assert.ok(mine >= 0.9 * all, `${fn}: ${mine} of ${all} with span_id ${id}`);
      assert.strictEqual(wrong, 0, `${fn}: samples of the other request`);
      const named = samples.find((s) => inFunction(fn)(s) && s.labels.span_id === id);
      assert.strictEqual(named.labels.span_name, spanName);
    };
    check('burnInRequestOne', ids[0], ids[1], 'GET /one/_id_');
    check('burnInRequestTwo', ids[1], ids[0], 'GET /two');
    // wrapWithLabels' labels and the span's are both on a sample
    const one = count(samples, (s) => inFunction('burnInRequestOne')(s) && s.labels.route === '/one' && s.labels.span_id === ids[0]);
    assert.ok(one >= 0.9 * count(samples, inFunction('burnInRequestOne')), 'route and span_id together');
    assert.strictEqual(count(samples, (s) => inFunction('burnInRequestTwo')(s) && 'route' in s.labels), 0);
    // children run under their root's span_id
    const child = count(samples, (s) => inFunction('burnInChild')(s) && ids.includes(s.labels.span_id));
    assert.ok(child >= 0.9 * count(samples, inFunction('burnInChild')), 'child spans carry the root span_id');
    assert.strictEqual(processor.errors, 0);
  });

  it('rootSpanOnly: false labels every span with its own id', async () => {
    const every = new api.PyroscopeSpanProcessor({ rootSpanOnly: false });
    const p2 = new (require('@opentelemetry/sdk-trace-base').BasicTracerProvider)({ spanProcessors: [every] });
    const t = p2.getTracer('every');
    let childLabels;
    let childId;
    await t.startActiveSpan('outer', async (outer) => {
      await t.startActiveSpan('inner', async (inner) => {
        await tick();
        childId = inner.spanContext().spanId;
        childLabels = inner.attributes['pyroscope.profile.id'];
        inner.end();
      });
      outer.end();
    });
    assert.strictEqual(childLabels, childId);
    assert.strictEqual(every.labelled, 2);
    await p2.shutdown();
  });

  it('never throws from onStart/onEnd: errors are counted', () => {
    const p = new api.PyroscopeSpanProcessor();
    const broken = { spanContext() { throw new Error('broken span'); }, name: 'x' };
    const quiet = require('../lib/logger');
    api.setLogger({ debug() {}, info() {}, warn() {}, error() {}, trace() {}, fatal() {} });
    try {
      p.onStart(broken, otel.ROOT_CONTEXT);
      p.onEnd(null);
    } finally {
      quiet.setLogger(null);
    }
    assert.strictEqual(p.errors, 1);
    return p.shutdown();
  });

  it('refuses unknown options', () => {
    assert.throws(() => new api.PyroscopeSpanProcessor({ labelAll: true }), /unknown option "labelAll"/);
  });
});
