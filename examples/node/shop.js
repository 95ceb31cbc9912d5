'use strict';
// A tiny shop service to profile: what `make demo-node` runs.
//
//   node examples/node/shop.js [--seconds N] [--output-dir DIR]
//
// An HTTP server on a loopback port serves POST /checkout and POST /cart to
// a client loop in the same process (two requests in flight). Every request
// burns CPU in three steps around one `await` on a pretend database:
//
//   parseOrder      ~50 %   before the await
//   priceCart       ~30 %   after it
//   renderReceipt   ~20 %   after it
//
// Each request runs inside Pyroscope.wrapWithLabels({ endpoint }), so every
// sample -- after the `await` too -- carries endpoint=/checkout or /cart.
// With the OpenTelemetry SDK installed (the repository's dev dependencies)
// each request is also a root span whose samples carry span_id and
// span_name, through the package's PyroscopeSpanProcessor.
//
// The profiles go to --output-dir (default $PYROSCOPE_OUTPUT_DIR, else
// ./pyroscope-profiles), or to a Pyroscope server when
// PYROSCOPE_SERVER_ADDRESS is set. The run lasts --seconds (default
// $SHOP_SECONDS, else 5). The program never calls process.exit: it ends
// when its work is done, after stop() has written the last period.

const http = require('node:http');
const { parseArgs } = require('node:util');

// In an application: require('pyroscope-native').
const Pyroscope = loadPackage();

function loadPackage() {
  try {
    return require('pyroscope-native');
  } catch (err) {
    if (err.code !== 'MODULE_NOT_FOUND') throw err;
    return require('../..');
  }
}

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: process.env.SHOP_SECONDS || '5' },
    'output-dir': { type: 'string',
                    default: process.env.PYROSCOPE_OUTPUT_DIR || 'pyroscope-profiles' },
  },
});

// Milliseconds of CPU each step burns per request: the 50/30/20 split.
const PARSE_MS = 5;
const PRICE_MS = 3;
const RENDER_MS = 2;
const ORDER = 'sku:A-100,qty:2,sku:B-220,qty:1,sku:C-310,qty:5,coupon:SPRING,ship:express';

// Each step loops on its own (no shared helper), so its time is its own
// "self" time in the flame graph. They run on the one JS thread, so wall
// time spent in the loop is that thread's CPU time.
function parseOrder(ms) {
  const end = performance.now() + ms;
  let fields = 0;
  while (performance.now() < end) {
    for (const token of ORDER.split(',')) {
      const [key, value] = token.split(':');
      if (key && value) fields++;
    }
  }
  return fields;
}

function priceCart(ms) {
  const end = performance.now() + ms;
  let total = 0;
  while (performance.now() < end) {
    for (let cents = 100; cents < 400; cents += 3) total += cents * 1.2 - (cents % 7) * 0.05;
  }
  return total;
}

function renderReceipt(ms) {
  const end = performance.now() + ms;
  let size = 0;
  while (performance.now() < end) {
    for (let n = 0; n < 10; n++) {
      size += `${String(n).padStart(3)} x item-${String(n * 7).padStart(3, '0')} ${(n * 1.25).toFixed(2)}\n`.length;
    }
  }
  return size;
}

// The pretend database: answers on a later turn of the event loop, as I/O
// would. Everything after `await` runs in a new callback.
const queryStock = () => new Promise((resolve) => setTimeout(resolve, 1));

// ------------------------------------------------------------ tracing

// (tracer, provider): OpenTelemetry spans when the SDK is installed,
// a stand-in that runs the callback without a span otherwise.
function makeTracer() {
  try {
    const { context, trace } = require('@opentelemetry/api');
    const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
    const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
    if (typeof Pyroscope.PyroscopeSpanProcessor !== 'function') {
      throw new Error('this build of pyroscope-native has no PyroscopeSpanProcessor');
    }
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    const provider = new BasicTracerProvider({
      spanProcessors: [new Pyroscope.PyroscopeSpanProcessor()],
    });
    trace.setGlobalTracerProvider(provider);
    return { tracer: trace.getTracer('shop'), provider };
  } catch (err) {
    console.error(`shop: no OpenTelemetry spans (${err.message})`);
    return {
      tracer: { startActiveSpan: (name, fn) => fn({ end() {} }) },
      provider: null,
    };
  }
}

const { tracer, provider } = makeTracer();

// ------------------------------------------------------------- server

async function handle(endpoint) {
  parseOrder(PARSE_MS);
  await queryStock();
  // Still labelled endpoint=<this request's> and still in its span here.
  priceCart(PRICE_MS);
  renderReceipt(RENDER_MS);
  return { ok: true, endpoint };
}

function onRequest(req, res) {
  const endpoint = req.url;
  if (req.method !== 'POST' || (endpoint !== '/checkout' && endpoint !== '/cart')) {
    res.writeHead(404).end();
    return;
  }
  req.resume();
  tracer.startActiveSpan(`POST ${endpoint}`, (span) => {
    Pyroscope.wrapWithLabels({ endpoint }, () => {
      handle(endpoint).then((body) => {
        span.end();
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      }, (err) => {
        span.end();
        res.writeHead(500).end(String(err));
      });
    });
  });
}

// ------------------------------------------------------------- client

// One client loop per endpoint, each keeping one request in flight.
async function clientLoop(port, endpoint, deadline, served) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  while (performance.now() < deadline) {
    await new Promise((resolve, reject) => {
      const req = http.request({ port, host: '127.0.0.1', method: 'POST', path: endpoint, agent },
        (res) => {
          res.resume();
          res.on('end', resolve);
        });
      req.on('error', reject);
      req.end('{}');
    });
    served[endpoint] = (served[endpoint] || 0) + 1;
  }
  agent.destroy();
}

async function main() {
  const settings = { appName: 'node-shop', tags: { region: 'demo' } };
  if (!process.env.PYROSCOPE_SERVER_ADDRESS) settings.outputDir = args['output-dir'];
  Pyroscope.init(settings);
  Pyroscope.start();

  const server = http.createServer(onRequest);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  const started = performance.now();
  const deadline = started + Number(args.seconds) * 1000;
  const served = {};
  await Promise.all(['/checkout', '/cart'].map((e) => clientLoop(port, e, deadline, served)));
  server.close();
  if (provider) await provider.shutdown();
  await Pyroscope.stop();
  const total = Object.values(served).reduce((a, b) => a + b, 0);
  console.log(`shop: served ${total} requests in ${((performance.now() - started) / 1000).toFixed(1)} s ` +
              `(${Object.entries(served).map(([k, v]) => `${k}: ${v}`).join(', ')})`);
  if (settings.outputDir) console.log(`shop: profiles in ${settings.outputDir}/`);
}

main().catch((err) => {
  console.error(`shop: ${err.stack || err}`);
  process.exitCode = 1;
});
