'use strict';
// PyroscopeSpanProcessor: links OpenTelemetry spans to profiles, for
// @opentelemetry/sdk-trace-base 2.x with AsyncLocalStorageContextManager.
//
//   const provider = new BasicTracerProvider({ spanProcessors: [new PyroscopeSpanProcessor()] });
//
// A local root span (no parent, or a remote parent) gets the attribute
// pyroscope.profile.id (its span id, 16 hex digits) and a native label handle of
// span_id, trace_id and span_name; child spans share their root's handle. The native
// side asks `spanSource()` for the active span's handle at every async resumption, so
// samples carry the root span across awaits, and concurrent requests never mix.
// With { rootSpanOnly: false } every span labels with its own id and name.
// onStart/onEnd never throw: failures are logged (first few as warnings) and counted.
// All of it runs on the main JS thread.

const logger = require('./logger');

const PROFILE_ID_ATTRIBUTE = 'pyroscope.profile.id';
const MAX_VALUE_BYTES = 2048; // the core's label value limit
const LOUD_ERRORS = 10;       // warnings before failures are logged at debug level

let otelApi;
function api() {
  if (!otelApi) {
    try {
      otelApi = require('@opentelemetry/api');
    } catch (e) {
      throw new Error('PyroscopeSpanProcessor needs @opentelemetry/api (npm install ' +
        '@opentelemetry/api @opentelemetry/sdk-trace-base @opentelemetry/context-async-hooks)');
    }
  }
  return otelApi;
}

let nativeLabels; // cached: a require() per span costs microseconds of path lookups
function labels() {
  if (!nativeLabels) nativeLabels = require('./native').labels;
  return nativeLabels;
}

// span -> its label handle, while the span runs (shared by all processors).
const handles = new WeakMap();
let installed = 0; // processors that are not shut down

function spanSource() {
  const span = otelApi.trace.getSpan(otelApi.context.active());
  return span === undefined ? undefined : handles.get(span);
}

// A span name as a label value: no { } , = and at most 2048 UTF-8 bytes.
function labelValue(text) {
  let s = String(text).replace(/[{},=]/g, '_');
  if (Buffer.byteLength(s) > MAX_VALUE_BYTES) {
    s = Buffer.from(s).subarray(0, MAX_VALUE_BYTES).toString('utf8');
    s = s.replace(/\uFFFD$/, ''); // a character cut in half
  }
  return s;
}

function isLocalRoot(span, parentContext) {
  const parent = span.parentSpanContext ||
    (parentContext && api().trace.getSpanContext(parentContext));
  return !parent || parent.isRemote === true;
}

class PyroscopeSpanProcessor {
  /** options: { rootSpanOnly = true } */
  constructor(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError('PyroscopeSpanProcessor: options must be an object');
    }
    for (const k of Object.keys(options)) {
      if (k !== 'rootSpanOnly') {
        throw new Error(`PyroscopeSpanProcessor: unknown option "${k}" (known: rootSpanOnly)`);
      }
    }
    if (options.rootSpanOnly !== undefined && typeof options.rootSpanOnly !== 'boolean') {
      throw new TypeError('PyroscopeSpanProcessor: rootSpanOnly must be a boolean');
    }
    this.rootSpanOnly = options.rootSpanOnly !== false;
    this.errors = 0;  // onStart/onEnd failures (each logged)
    this.labelled = 0; // spans given their own label handle
    this._shut = false;
    api();
    const l = labels();
    if (installed++ === 0) l.setSpanSource(spanSource);
  }

  _failed(what, e) {
    this.errors += 1;
    const message = `span processor ${what} failed; the span's samples may be unlabelled: ` +
      `${e && e.message}`;
    if (this.errors <= LOUD_ERRORS) logger.warn(message);
    else logger.debug(message);
  }

  onStart(span, parentContext) {
    try {
      if (this._shut) return;
      const root = isLocalRoot(span, parentContext);
      if (!root && this.rootSpanOnly) {
        const parent = parentContext && otelApi.trace.getSpan(parentContext);
        const h = parent && handles.get(parent);
        if (h !== undefined) handles.set(span, h);
        return;
      }
      const ctx = span.spanContext();
      const pairs = [['span_id', ctx.spanId], ['trace_id', ctx.traceId]];
      const name = labelValue(span.name);
      if (name) pairs.push(['span_name', name]);
      handles.set(span, labels().spanHandle(pairs));
      span.setAttribute(PROFILE_ID_ATTRIBUTE, ctx.spanId);
      this.labelled += 1;
    } catch (e) {
      this._failed('onStart', e);
    }
  }

  // Code that still runs in an ended span's context is no longer labelled with it.
  onEnd(span) {
    try {
      handles.delete(span);
    } catch (e) {
      this._failed('onEnd', e);
    }
  }

  // Exports the profiler's current period too, when it runs, so the samples of the
  // flushed spans can be found.
  async forceFlush() {
    try {
      const index = require('./index');
      if (index.isRunning()) await index.flush(5);
    } catch (e) {
      this._failed('forceFlush', e);
    }
  }

  async shutdown() {
    if (this._shut) return; // (or inactive from the start: it never counted in `installed`)
    this._shut = true;
    try {
      if (--installed === 0) labels().setSpanSource(null);
    } catch (e) {
      this._failed('shutdown', e);
    }
  }
}

module.exports = { PyroscopeSpanProcessor, PROFILE_ID_ATTRIBUTE, labelValue };
