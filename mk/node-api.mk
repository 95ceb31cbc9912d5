# The Node package's public API tests (bindings/node/test/api-*.test.js: export surface,
# config and variables, labels, OpenTelemetry, upload, folder output, source maps,
# middleware, life cycle). Needs `npm ci` first (it builds the addon); ~15 s.
.PHONY: test-node-api
test-node-api:
	npx mocha --timeout 60000 'bindings/node/test/api-*.test.js'
