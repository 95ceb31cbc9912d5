#!/usr/bin/env node
'use strict';
// The package's command line (package.json "bin"):
//
//   pyroscope-native report PATH... [--output HTML] [--top N] [--title TITLE] [--type TYPE]
//       [--filter KEY=VALUE]... [--group-by KEY] [--diff [A B]]
//
// The core's report command (pn_report_command_run) parses the words, runs the report and
// says what to print; exit status 2 on a usage error, 1 when the profiles cannot be read.
// The addon only: no agent starts, no exit hooks.
const path = require('path');

const addon = require(path.join(__dirname, '..', 'lib', 'addon'));
const r = addon.reportCommand('pyroscope-native', process.argv.slice(2));
process.stdout.write(r.stdout);
process.stderr.write(r.stderr);
process.exitCode = r.status;
