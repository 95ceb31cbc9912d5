"""The ``python -m pyroscope`` command line (installed as ``pyroscope-native`` too).

    python -m pyroscope run [options] script.py [args...]
    python -m pyroscope run [options] -m module [args...]
    python -m pyroscope report PATH... [options]

``run`` profiles a program in this interpreter, run the way ``python
script.py`` / ``python -m module`` would run it. Its options are the
keywords of ``pyroscope.configure`` in kebab case; settings not given fall
back to the PYROSCOPE_* environment variables. Without a server address the
profiles go to a local folder (./pyroscope-profiles unless told otherwise)
and at exit a flame graph (flamegraph.html) is written next to them and the
top functions are printed to stderr, so the program's stdout stays its own.

``report`` reads saved profiles (files or folders) and does the same: it is
the core's report command (pn_report_command_run), which parses its options.
"""

import argparse
import importlib.util
import logging
import os
import re
import runpy
import sys
import threading
import traceback

import pyroscope
from pyroscope import _native

DEFAULT_OUTPUT_DIR = "pyroscope-profiles"
REPORT_NAME = "flamegraph.html"
DEFAULT_TOP = 15
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C

LINE_MODES = {m.name.lower(): m for m in pyroscope.LineNo}
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
              "warning": logging.WARNING, "error": logging.ERROR,
              "off": logging.CRITICAL + 1, "none": logging.CRITICAL + 1}


class UsageError(Exception):
    """Bad command line or settings: printed as ``pyroscope: <message>``, exit 2."""


# ---------------------------------------------------------------- option types
# argparse prefixes a type's error with the flag ("argument --tag: ..."), so
# these messages only say what is wrong with the value.

def _number(text):
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _whole(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _count(text):
    n = _whole(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return n


def _pair(text):
    # Split on the first '=' only: header values may contain '='.
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _line_mode(text):
    mode = LINE_MODES.get(text.lower())
    if mode is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not one of {', '.join(m.name for m in pyroscope.LineNo)}")
    return mode


# (flag, configure keyword, kind, metavar, help), one per configure keyword of
# the core's settings table (pyroscope.SETTINGS), in kebab case; pairs are
# repeatable in the singular. Kinds: "str", "number", "whole", "bool"
# (--x / --no-x), "pairs" (repeatable KEY=VALUE), "line".
_PAIR_FLAGS = {"tags": "--tag", "http_headers": "--http-header", "otlp_headers": "--otlp-header"}
_KINDS = {"number": "number", "integer": "whole", "bool": "bool", "pairs": "pairs"}
_HELP = {  # where the command line's default is not configure's
    "application_name": "application name (default: the script's or module's name)",
    "server_address": "Pyroscope server to upload to (default: none, profiles go to the "
                      "output folder)",
    "output_dir": f"folder for the profiles and the flame graph (default ./{DEFAULT_OUTPUT_DIR} "
                  "when there is no server address)",
}


def _run_options():
    out = []
    for row in pyroscope.SETTINGS:
        key = (row["python"] or "").split("|")[0]
        if not key:
            continue
        kind = "line" if key == "line_no" else _KINDS.get(row["kind"], "str")
        unit = f" {row['unit']}" if row["unit"] else ""
        text = _HELP.get(key) or row["meaning"] + (
            f" (default {row['default']}{unit})" if row["default"] else "")
        metavar = None if kind == "bool" else "KEY=VALUE" if kind == "pairs" else key.upper()
        out.append((_PAIR_FLAGS.get(key, "--" + key.replace("_", "-")), key, kind, metavar,
                    text.replace("%", "%%")))
    return tuple(out)


RUN_OPTIONS = _run_options()

_TYPES = {"str": str, "number": _number, "whole": _whole, "pairs": _pair, "line": _line_mode}


def _prog():
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m pyroscope" if name in ("", "__main__.py", "-c") else name


def _build_parsers():
    prog = _prog()
    parser = argparse.ArgumentParser(
        prog=prog, allow_abbrev=False,
        description="Profile a Python program, or report on saved profiles.",
        epilog=f"'{prog} run -h' and '{prog} report -h' list their options.")
    sub = parser.add_subparsers(dest="command", metavar="{run,report}")

    # Abbreviations stay off: the split below must know every flag exactly.
    run = sub.add_parser(
        "run", allow_abbrev=False, help="profile a program",
        usage=f"{prog} run [options] (script.py | -m module) [args ...]",
        description="Run a script or module with the profiler on. Options must come "
                    "before the script; everything after it is the program's. Settings "
                    "not given fall back to PYROSCOPE_* environment variables.")
    for flag, key, kind, metavar, text in RUN_OPTIONS:
        if kind == "bool":
            run.add_argument(flag, dest=key, action=argparse.BooleanOptionalAction,
                             default=None, help=text)
        elif kind == "pairs":
            run.add_argument(flag, dest=key, action="append", type=_pair, metavar=metavar,
                             help=text)
        else:
            run.add_argument(flag, dest=key, type=_TYPES[kind], metavar=metavar, help=text)
    run.add_argument("--top", type=_count, default=DEFAULT_TOP, metavar="N",
                     help=f"functions listed at exit (default {DEFAULT_TOP}; 0: none)")

    # Listed here; its words go to the core's report command (main).
    sub.add_parser("report", add_help=False,
                   help="flame graph and top functions of saved profiles")
    return parser, run


def _split_run_args(words, parser):
    """(option words, "script" or "module", target, program args). Options
    end at the first word that is not one (the script) or at -m MODULE; the
    rest belongs to the program, options or not."""
    takes_value = {flag for flag, _key, kind, _m, _t in RUN_OPTIONS if kind != "bool"}
    takes_value.add("--top")
    i = 0
    while i < len(words):
        w = words[i]
        if w == "--":
            if i + 1 == len(words):
                break
            return words[:i], "script", words[i + 1], words[i + 2:]
        if w == "-m":
            if i + 1 == len(words):
                parser.error("argument -m: expected a module name")
            return words[:i], "module", words[i + 1], words[i + 2:]
        if w.startswith("-m") and not w.startswith("--"):  # -mmodule, as python takes it
            return words[:i], "module", w[2:], words[i + 1:]
        if not w.startswith("-") or w == "-":
            return words[:i], "script", w, words[i + 1:]
        i += 2 if w in takes_value else 1
    return words, None, None, []


# --------------------------------------------------------------------- run

def _env(name):
    return os.environ.get("PYROSCOPE_" + name, "").strip()


def _default_app_name(name):
    # The core allows letters, digits and _ . - / in application names.
    return re.sub(r"[^A-Za-z0-9_./-]", "_", name)[:200] or "python"


def _setup_logging(enabled, level_text):
    """With --enable-logging the profiler's log goes to stderr through the
    "pyroscope" logger only: the program's own logging setup is untouched."""
    if enabled is None:
        enabled = pyroscope._env_bool("PYROSCOPE_ENABLE_LOGGING", False)
    if not enabled:
        return
    level_text = (level_text or _env("LOG_LEVEL") or "info").lower()
    level = LOG_LEVELS.get(level_text)
    if level is None and level_text.isdigit():
        level = int(level_text)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pyroscope: %(levelname)s: %(message)s"))
    pyroscope.LOGGER.addHandler(handler)
    pyroscope.LOGGER.propagate = False
    # An unknown level is left to configure, which rejects it by name.
    pyroscope.LOGGER.setLevel(level if level is not None else logging.INFO)


def _flag_message(message, settings):
    """configure names settings by keyword ("sample_rate: ..."); name the
    flag instead when the value came from one (not from the environment)."""
    for flag, key, _kind, _metavar, _text in RUN_OPTIONS:
        if key in settings and re.match(re.escape(key) + r"\b", message):
            return flag + message[len(key):]
    return message


def _exit_code(code):
    """SystemExit's code as a process exit status, like the interpreter does."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _print_program_error(exc):
    # Drop the frames of this module and runpy above the program's own, so
    # the traceback looks like the one `python script.py` prints.
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_globals.get("__name__") in (__name__, "runpy"):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _wait_for_threads():
    """Join the program's non-daemon threads, as the interpreter would before
    exiting; their samples belong to the run too."""
    me = threading.current_thread()
    while True:
        pending = [t for t in threading.enumerate()
                   if t is not me and not t.daemon and t.is_alive()]
        if not pending:
            return
        for t in pending:
            t.join()


def _run_program(runner):
    """Run the program; its exit status (SystemExit code, 1 on an uncaught
    exception, 130 on Ctrl-C)."""
    code = 0
    try:
        runner()
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt as exc:
        _print_program_error(exc)
        code = EXIT_INTERRUPTED
    except BaseException as exc:  # anything else the program raises is its failure
        _print_program_error(exc)
        code = 1
    try:
        _wait_for_threads()
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    return code


def _say(message):
    print(f"pyroscope: {message}", file=sys.stderr, flush=True)


def _report_run(_folder, title, top):
    """Flame graph pages and top functions of the profiles this run wrote
    (the core's run report: older files in the folder are left out)."""
    failed = pyroscope.stats().get("folder_failed", 0)
    text, said = _native.run_report(title, top, _launcher_files(), failed)
    if text:
        sys.stderr.write("\n" + text)
    for line in said.splitlines():
        _say(line)


_LAUNCHER = [""]  # sys.argv[0] as the CLI started, before the program's argv

# Files of the frames between the interpreter and the user's program: the
# report hides them at the root of every stack. Matched as path suffixes, so
# profiles recorded by another install of this package are trimmed too.
LAUNCHER_FILES = ("pyroscope/cli.py", "pyroscope/__main__.py", "runpy.py", "<frozen runpy>",
                  "bin/pyroscope-native")


def _launcher_files():
    files = set(LAUNCHER_FILES)
    if _LAUNCHER[0]:
        files.add(_LAUNCHER[0])  # a console script of another name
    return sorted(files)


def _run(ns, kind, target, program_args):
    settings = {}
    for _flag, key, kind_, _metavar, _text in RUN_OPTIONS:
        value = getattr(ns, key)
        if value is not None:
            settings[key] = dict(value) if kind_ == "pairs" else value

    # Where the program comes from, and what `python` would put in sys.path[0].
    if kind == "script":
        if not os.path.exists(target):
            raise UsageError(f"can't open file {target!r}: no such file or folder")
        real = os.path.realpath(target)
        path0 = real if os.path.isdir(real) else os.path.dirname(real)
        name = os.path.basename(os.path.normpath(target))
        default_name = name[:-3] if name.endswith(".py") else name
    else:
        path0 = os.getcwd()
        default_name = target
    # python -P (3.11+) adds no such entry; neither do we.
    if not getattr(sys.flags, "safe_path", False):
        sys.path[0] = path0
    if kind == "module":
        try:
            found = importlib.util.find_spec(target) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise UsageError(f"no module named {target!r}")

    if "application_name" not in settings and not _env("APPLICATION_NAME"):
        settings["application_name"] = _default_app_name(default_name)
    app_name = settings.get("application_name") or _env("APPLICATION_NAME")

    # No server: profiles go to a folder, so there is something to look at.
    folder = settings.get("output_dir") or _env("OUTPUT_DIR")
    if not folder and not settings.get("server_address") and not _env("SERVER_ADDRESS"):
        folder = DEFAULT_OUTPUT_DIR
    if folder:
        # Absolute, so a program that changes directory writes to the same place.
        settings["output_dir"] = os.path.abspath(folder)
        # A folder that cannot be made is the reason, not "ran too briefly".
        try:
            os.makedirs(settings["output_dir"], exist_ok=True)
        except OSError as exc:
            raise UsageError(_flag_message(
                f"output_dir: cannot create the folder {settings['output_dir']}: "
                f"{exc.strerror or exc}", settings)) from None
    if folder:
        _native.run_begin(settings["output_dir"])  # the core lists the folder now

    _setup_logging(ns.enable_logging, ns.log_level)
    try:
        pyroscope.configure(**settings)
    except (ValueError, TypeError, RuntimeError, OSError) as exc:
        raise UsageError(_flag_message(str(exc), settings)) from None

    sys.argv = [target, *program_args]
    pid = os.getpid()
    if kind == "script":
        code = _run_program(lambda: runpy.run_path(target, run_name="__main__"))
    else:
        code = _run_program(lambda: runpy.run_module(target, run_name="__main__",
                                                     alter_sys=True))
    try:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass  # the program closed or replaced it
        pyroscope.shutdown()  # the last period is exported, within stop_timeout
        # A forked child that leaves the program by SystemExit ends up here
        # too; the report is the parent's job.
        if folder and os.getpid() == pid:
            _report_run(folder, app_name, ns.top)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return code


def main(argv=None):
    """Entry point of ``python -m pyroscope`` and ``pyroscope-native``;
    returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if sys.argv and sys.argv[0]:
        _LAUNCHER[0] = os.path.abspath(sys.argv[0])
    parser, run_parser = _build_parsers()
    try:
        if argv and argv[0] == "run":
            options, kind, target, program_args = _split_run_args(argv[1:], run_parser)
            ns = run_parser.parse_args(options)
            if kind is None:
                run_parser.error("a script or -m MODULE is required")
            if not target:
                run_parser.error("argument -m: expected a module name")
            return _run(ns, kind, target, program_args)
        if argv and argv[0] == "report":  # the core's command: usage, messages, report
            # bytes: a path need not be UTF-8 (sys.argv has it surrogate-escaped)
            words = [os.fsencode(w) for w in argv[1:]]
            status, out, err = _native.report_command(_prog(), words, _launcher_files())
            sys.stdout.write(out)
            sys.stderr.write(err)
            return status
        parser.parse_args(argv)
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    except UsageError as exc:
        print(f"pyroscope: {exc}", file=sys.stderr)
        return EXIT_USAGE
