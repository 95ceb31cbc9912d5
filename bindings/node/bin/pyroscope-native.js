#!/usr/bin/env node
'use strict';
// The package's command line (package.json "bin"):
//
//   pyroscope-native report PATH... [--output HTML] [--top N] [--title TITLE] [--type TYPE]
//       [--filter KEY=VALUE]... [--group-by KEY] [--diff A B]
//
// Reads saved profiles (files, or folders of them: e.g. an outputDir), prints the top
// functions (after the total per value of --group-by's label) and writes a self-contained
// flame graph page. Exit status 2 on a usage error, 1 when the profiles cannot be read.
const path = require('path');
const { parseArgs } = require('util');

const PROG = 'pyroscope-native';
const USAGE = `usage: ${PROG} report PATH... [--output HTML] [--top N] [--title TITLE] [--type TYPE]
         [--filter KEY=VALUE]... [--group-by KEY] [--diff A B]

  PATH             a profile (.pb or .pb.gz) or a folder of them (e.g. an outputDir)
  --output, -o     where to write the flame graph page (default: flamegraph.html in the
                   first folder, or next to the first file)
  --top N          functions listed (default 20; 0: none)
  --title TITLE    title of the page
  --type TYPE      which profiles of a folder: cpu, wall or heap (default cpu, else wall)
  --filter K=V     only samples with this label (repeatable: different keys must all
                   match, values of one key are alternatives; K=(none): without it)
  --group-by KEY   print the total per value of this label
  --diff A B       compare two selections, each KEY=VALUE[,KEY=VALUE...]`;

class UsageError extends Error {}

function whole(flag, text) {
  if (!/^\d+$/.test(text)) throw new UsageError(`${flag}: ${JSON.stringify(text)} is not a whole number >= 0`);
  return Number(text);
}

function parse(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      tokens: true,
      options: {
        output: { type: 'string', short: 'o' },
        top: { type: 'string' },
        title: { type: 'string' },
        type: { type: 'string' },
        filter: { type: 'string', multiple: true },
        'group-by': { type: 'string' },
        diff: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    throw new UsageError(e.message);
  }
  return parsed;
}

async function report(argv) {
  const { values, tokens } = parse(argv);
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  // --diff takes the two words after it (A and B); the other words are the paths.
  let diff;
  const paths = [];
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (t.kind === 'option' && t.name === 'diff') {
      const a = tokens[i + 1];
      const b = tokens[i + 2];
      if (diff || !a || !b || a.kind !== 'positional' || b.kind !== 'positional') {
        throw new UsageError('--diff takes two selections: --diff KEY=VALUE[,...] KEY=VALUE[,...]');
      }
      diff = [a.value, b.value];
      i += 2;
    } else if (t.kind === 'positional') {
      paths.push(t.value);
    }
  }
  if (paths.length === 0) throw new UsageError('report: give at least one profile file or folder');
  const opts = { filter: values.filter || [] }; // --top's default is the core's
  if (values.top !== undefined) opts.top = whole('--top', values.top);
  if (values.output !== undefined) opts.output = values.output;
  if (values.title !== undefined) opts.title = values.title;
  if (values.type !== undefined) opts.type = values.type;
  if (values['group-by'] !== undefined) opts.groupBy = values['group-by'];
  if (diff) opts.diff = diff;

  // The addon and the report code only: no agent starts, no exit hooks.
  const addon = require(path.join(__dirname, '..', 'lib', 'addon'));
  const { writeReport } = require(path.join(__dirname, '..', 'lib', 'report'));
  let r;
  try {
    r = await writeReport(addon, paths, opts);
  } catch (e) {
    // The API names its options; say the flags instead.
    if (e && e.code === 'ERR_PYROSCOPE_REPORT') {
      throw new UsageError(e.message.replace(/^writeReport: /, '')
        .replace(/^(filter|type|diff|title|output|top):/, '--$1:').replace(/^group_by:/, '--group-by:'));
    }
    throw e;
  }
  process.stdout.write(r.text);
  if (r.text) process.stdout.write('\n');
  const n = r.profiles;
  let line = `${n} ${r.type ? r.type + ' ' : ''}profile${n === 1 ? '' : 's'} read, flame graph: ${r.output}`;
  if (r.otherTypes.length) line += ` (also here: ${r.otherTypes.join(', ')}; see --type)`;
  process.stdout.write(line + '\n');
  return 0;
}

async function main(argv) {
  const [command, ...rest] = argv;
  try {
    if (command === 'report') return await report(rest);
    if (command === '-h' || command === '--help' || command === 'help') {
      process.stdout.write(USAGE + '\n');
      return 0;
    }
    throw new UsageError(command === undefined ? 'a command is required'
      : `unknown command ${JSON.stringify(command)}`);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`${PROG}: ${e.message}\n`);
      if (command !== 'report') process.stderr.write(USAGE + '\n');
      return 2;
    }
    process.stderr.write(`${PROG}: ${e && e.message || e}\n`);
    return 1;
  }
}

main(process.argv.slice(2)).then((code) => { process.exitCode = code; });
