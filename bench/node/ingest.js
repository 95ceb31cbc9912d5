'use strict';
// A loopback stand-in for a Pyroscope server: answers every POST with 200
// and keeps the requests, to be decoded later (outside measured windows).
// Decodes both upload shapes as the Pyroscope server reads them: with
// format=pprof the raw gzip'ed pprof body (the anchor's, and ours through
// Node's http), else a multipart form with a `profile` file part (ours when
// libcurl sends). Used by run.js and by the binding's life-cycle tests.

const http = require('node:http');

const { decodePprof } = require('./profiles');

// -> { url, kept: [{url, headers, body}], close() }
function startIngestServer() {
  const kept = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      kept.push({ url: req.url, headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(200, { 'content-length': 0 });
      res.end();
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve({
      url: `http://127.0.0.1:${server.address().port}`,
      kept,
      close: () => new Promise((r) => {
        server.closeAllConnections();
        server.close(r);
      }),
    }));
  });
}

// One captured request -> { app, query, profiles: [Profile] }. Multipart
// bodies are parsed by Response.formData(), the fetch API's own parser.
async function decodeUpload({ url, headers, body }) {
  const u = new URL(url, 'http://loopback');
  const app = (u.searchParams.get('name') || '').split('{')[0];
  const ctype = headers['content-type'] || '';
  let parts = [body];
  if (u.searchParams.get('format') !== 'pprof' && ctype.startsWith('multipart/form-data')) {
    const form = await new Response(body, { headers: { 'content-type': ctype } }).formData();
    parts = [];
    for (const [, value] of form) {
      if (typeof value !== 'string') parts.push(Buffer.from(await value.arrayBuffer()));
    }
  }
  return { app, query: Object.fromEntries(u.searchParams), profiles: parts.map(decodePprof) };
}

module.exports = { startIngestServer, decodeUpload };
