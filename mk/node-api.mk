# The Node package's public API tests (bindings/node/test/api-*.test.js: export surface,
# config and variables, labels, OpenTelemetry, upload, folder output, source maps,
# middleware, life cycle), after build-node (mk/node.mk); ~15-20 s.
.PHONY: test-node-api
test-node-api: build-node
	node_modules/.bin/mocha --timeout 60000 --exit 'bindings/node/test/api-*.test.js'
