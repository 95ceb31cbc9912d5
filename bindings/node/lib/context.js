'use strict';
// Labels in async context: an AsyncLocalStorage holds the running context's
// label-set handle; its id (and the active span's) is published into two
// int32 cells the SIGPROF handler reads, at every point where the running
// context can change: async resumption (async_hooks before), labels.run entry
// and exit, and (with a span source) AsyncLocalStorage.run/enterWith
// of other stores, which is how OpenTelemetry's context manager activates a
// span synchronously.
const { AsyncLocalStorage, createHook } = require('async_hooks');
const addon = require('./addon');

const als = new AsyncLocalStorage();
const slot = addon.labelsSlot(); // [0] context handle id, [1] span handle id
let spanSource = null;

function spanId() {
  if (!spanSource) return 0;
  let h;
  try {
    h = spanSource();
  } catch (_) {
    return 0; // a failing span source must not break the application
  }
  return h && typeof h.id === 'number' ? h.id : 0;
}

function publish() {
  if (!hookOn) return;
  const h = als.getStore();
  slot[0] = h ? h.id : 0;
  slot[1] = spanId();
}

// before: the resumed callback's context becomes current. There is no after
// hook (it would cost as much again per async hop): what runs between
// callbacks is the event loop, whose idle samples (V8's "(idle)") the join
// records without labels, or the next callback, published by its before.
const hook = createHook({
  before: publish,
});

// On while V8 samples (cpu or wall) and labels or a span source have been
// used: the hook costs every async hop, and only the handler needs the
// slot (get() works from the storage alone); an application that never
// labels anything pays nothing for it, since before the first label set
// every context's slot is 0 anyway.
let hookOn = false;
let sampling = false; // enable() .. disable()
let used = false; // a label set or a span source was used (never reset)

function sync() {
  const want = sampling && used;
  if (want === hookOn) return;
  if (want) {
    hook.enable();
    hookOn = true;
    publish();
  } else {
    hook.disable();
    hookOn = false;
    slot[0] = 0;
    slot[1] = 0;
  }
}

function enable() {
  sampling = true;
  sync();
}

function disable() {
  sampling = false;
  sync();
}

function markUsed() {
  used = true;
  sync();
}

// Handles of (base, labels) pairs seen recently, so a hot labels.run does not
// intern the same set each time. Per base (a WeakMap lets a base go), a trie
// keyed by each label's name then value, in the object's key order: a hit
// hashes only the caller's strings (literals have their hash cached), where
// a joined "k\0v\0" key string had to be built, flattened and hashed on
// every call (perf: ~3 us per labels.run, the largest part of ours on the JS
// thread in bench/node). Only handles of primitive values that the core took
// as given enter it, so a fixed set is counted at each use and strict labels
// see it again. Bounded per base: a trie of more than CACHE_MAX sets starts
// again empty.
const ROOT = {};
const cache = new WeakMap(); // base | ROOT -> { sets, root }
const CACHE_MAX = 256;

function trieNode() {
  return { h: undefined, kids: null }; // kids: Map name -> Map value -> node
}

function cached(entry, keys, raw) {
  let node = entry.root;
  for (let i = 0; i < keys.length; i++) {
    const byValue = node.kids && node.kids.get(keys[i]);
    node = byValue && byValue.get(raw[i]);
    if (!node) return undefined;
  }
  return node.h;
}

function remember(entry, keys, raw, h) {
  if (entry.sets >= CACHE_MAX) {
    entry.root = trieNode();
    entry.sets = 0;
  }
  let node = entry.root;
  for (let i = 0; i < keys.length; i++) {
    if (!node.kids) node.kids = new Map();
    let byValue = node.kids.get(keys[i]);
    if (!byValue) node.kids.set(keys[i], byValue = new Map());
    let next = byValue.get(raw[i]);
    if (!next) byValue.set(raw[i], next = trieNode());
    node = next;
  }
  if (node.h === undefined) entry.sets++;
  node.h = h;
}

// Labels given as something other than an object (null, undefined, a string):
// no labels, as if {} were given. Strict labels (addon.labelsStrict()): a TypeError.
function labelsObject(labels, what) {
  if (labels !== null && typeof labels === 'object' && !Array.isArray(labels)) return labels;
  if (labels === null || labels === undefined) return EMPTY;
  if (addon.labelsStrict()) {
    const e = new TypeError(what + ': labels must be an object of name -> string value');
    e.code = 'ERR_PYROSCOPE_LABELS';
    throw e;
  }
  addon.labelsNoteDropped(String(typeof labels), 'labels given as ' +
    (Array.isArray(labels) ? 'an array' : typeof labels) + ', not an object: ignored');
  return EMPTY;
}
const EMPTY = Object.freeze({});

// What the core gets for a value: strings as they are; numbers, booleans and
// bigints as strings (the anchor took numbers); null for anything else
// (null, undefined, objects, symbols, functions), which the core drops and
// counts, or refuses when strict.
function labelValue(v) {
  const t = typeof v;
  if (t === 'string') return v;
  if (t === 'number' || t === 'boolean' || t === 'bigint') return String(v);
  return null;
}

function handleFor(base, given, what) {
  const labels = labelsObject(given, what);
  const keys = Object.keys(labels);
  const raw = new Array(keys.length); // each value read once (a getter may answer otherwise)
  let primitive = true; // only sets of primitive values enter the cache (no objects kept)
  for (let i = 0; i < keys.length; i++) {
    let v;
    try {
      v = labels[keys[i]];
    } catch (_) {
      v = undefined; // a throwing getter: no value
    }
    raw[i] = v;
    if (v !== null && (typeof v === 'object' || typeof v === 'function' ||
                       typeof v === 'symbol')) primitive = false;
  }
  const owner = base || ROOT;
  let entry = cache.get(owner);
  if (entry) {
    const h = cached(entry, keys, raw);
    if (h) return h;
  } else {
    entry = { sets: 0, root: trieNode() };
    cache.set(owner, entry);
  }
  const values = new Array(keys.length);
  for (let i = 0; i < keys.length; i++) values[i] = labelValue(raw[i]);
  let h;
  try {
    h = addon.labelsHandle(base || null, keys, values);
  } catch (e) {
    e.message = what + ': ' + e.message;
    throw e;
  }
  if (primitive && !h.fixed) remember(entry, keys, raw, h);
  return h;
}

function run(labels, fn, ...args) {
  if (typeof fn !== 'function') throw new TypeError('labels.run: fn must be a function');
  const h = handleFor(als.getStore(), labels, 'labels.run');
  if (!used) markUsed();
  return als.run(h, runIn, fn, args);
}

function runIn(fn, args) {
  const p0 = slot[0];
  const p1 = slot[1];
  publish();
  try {
    return fn(...args);
  } finally {
    slot[0] = p0;
    slot[1] = p1;
  }
}

function pairsOf(h) {
  const out = {};
  if (h) for (const [k, v] of addon.labelsPairs(h)) out[k] = v;
  return out;
}

function get() {
  return pairsOf(als.getStore());
}

function set(labels) {
  const h = handleFor(null, labels, 'labels.set');
  if (!used) markUsed();
  als.enterWith(h);
  publish();
}

function spanHandle(pairs) {
  if (!Array.isArray(pairs)) throw new TypeError('spanHandle: pairs must be an array of [key, value]');
  const obj = {};
  for (const p of pairs) {
    if (!Array.isArray(p) || p.length !== 2) throw new TypeError('spanHandle: each pair must be [key, value]');
    obj[p[0]] = p[1];
  }
  return handleFor(null, obj, 'spanHandle');
}

// AsyncLocalStorage.run/enterWith of any store publish too while a span
// source is set: OpenTelemetry activates a span synchronously (context.with,
// startActiveSpan) without an async resumption. Patched once, inert without
// a span source.
let patched = false;
function patchStorage() {
  if (patched) return;
  patched = true;
  const proto = AsyncLocalStorage.prototype;
  const origRun = proto.run;
  const origEnterWith = proto.enterWith;
  proto.run = function run(store, callback, ...args) {
    if (!spanSource || this === als || typeof callback !== 'function') {
      return origRun.call(this, store, callback, ...args);
    }
    return origRun.call(this, store, runIn, callback, args);
  };
  proto.enterWith = function enterWith(store) {
    origEnterWith.call(this, store);
    if (spanSource && this !== als) publish();
  };
}

function setSpanSource(fn) {
  if (fn !== null && fn !== undefined && typeof fn !== 'function') {
    throw new TypeError('setSpanSource: expects a function returning a span handle, or null');
  }
  spanSource = fn || null;
  if (spanSource) patchStorage();
  if (spanSource && !used) markUsed();
  publish();
}

module.exports = { run, get, set, spanHandle, setSpanSource, enable, disable, publish, pairsOf,
  hooked: () => hookOn };
