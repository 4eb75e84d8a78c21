"""Command line: `lsp-complete serve | daemon | complete | demo | bench | models | doctor`."""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable
from pathlib import Path

from lsp_complete import __version__

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# The smallest --max-message-bytes: an editor's initialize request, with its client
# capabilities and workspace folders, runs to several KiB and must fit (the default is 32 MiB).
MIN_MESSAGE_BYTES = 64 * 1024
# The `maxTokens` and `threads` settings' own upper bounds (config.py).
MAX_TOKENS = 4096
MAX_THREADS = 1024


def _int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer from `low` to `high` (no upper bound when None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f"at least {low}" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"{value} is out of range: {bound}")
        return value

    return parse


def _minutes(text: str) -> float:
    """An argparse type: a finite number of minutes, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text}: minutes must be a finite number, 0 or more")
    return value


def _log_level(text: str) -> str:
    # Any case, as before (`--log-level debug`), and logging's aliases; `choices` then lists
    # the valid ones (logging itself raised a bare ValueError for an unknown one).
    level = text.upper()
    return {"WARN": "WARNING", "FATAL": "CRITICAL"}.get(level, level)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lsp-complete",
        description="Fast local inline code completion over the Language Server Protocol.",
    )
    parser.add_argument("--log-level", default="WARNING", type=_log_level, choices=LOG_LEVELS,
                        metavar="LEVEL", help="Python logging level: "
                        f"{', '.join(LOG_LEVELS)} (any case; default WARNING)")
    parser.add_argument("--version", action="version", version=f"lsp-complete {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the language server (stdio by default)")
    serve.add_argument("--tcp", type=_int_in(0, 65535), metavar="PORT",
                       help="listen on 127.0.0.1:PORT (0: any free port) for one client at a "
                       "time, which must send the launch's token as initializationOptions.token")
    serve.add_argument("--token-file", type=Path, metavar="PATH",
                       help="with --tcp: the token is in PATH (a file only you can read), not "
                       "a new one (LSP_COMPLETE_TOKEN also sets it)")
    serve.add_argument("--api-key-env", metavar="NAME",
                       help="the environment variable holding the remote engine's API key; "
                       "settings may name it too (otherwise only LSP_COMPLETE_* variables)")
    # Many LSP clients add --stdio on their own (vscode-languageclient, LSP4IJ): accept it.
    serve.add_argument("--stdio", action="store_true", help="talk LSP over stdio (the default)")
    serve.add_argument("--model", help="models.toml name or path to a .gguf file")
    serve.add_argument("--max-message-bytes", type=_int_in(MIN_MESSAGE_BYTES),
                       default=32 * 1024 * 1024, metavar="N",
                       help="refuse LSP messages larger than this (default 32 MiB; at least "
                       f"{MIN_MESSAGE_BYTES // 1024} KiB, so that an editor's initialize "
                       "request always fits)")
    serve.add_argument("--no-daemon", action="store_true",
                       help="run the engine in this process, not in the shared per-user daemon "
                       "(LSP_COMPLETE_NO_DAEMON=1 does the same; --tcp always does)")

    daemon = sub.add_parser("daemon", help="the shared engine daemon that `serve` starts")
    daemon_sub = daemon.add_subparsers(dest="daemon_command", required=True)
    daemon_status = daemon_sub.add_parser("status", help="the daemon, its model and sessions")
    daemon_status.add_argument("--json", action="store_true", help="machine-readable output")
    daemon_sub.add_parser("stop", help="save the KV caches and stop the daemon")
    daemon_run = daemon_sub.add_parser("run", help="run the daemon in the foreground")
    daemon_run.add_argument("--idle-minutes", type=_minutes, default=None, metavar="M",
                            help="exit after M minutes without a session (default 10, or "
                            "LSP_COMPLETE_DAEMON_IDLE_MINUTES)")
    daemon_run.add_argument("--model", help="the model its editors ask for (`serve --model`): "
                            "part of the daemon's identity")
    # `serve` starts a daemon at its model's own socket when another model's holds the shared.
    daemon_run.add_argument("--model-socket", action="store_true", help=argparse.SUPPRESS)

    complete = sub.add_parser("complete", help="one-shot completion at FILE:LINE:COL (1-based)")
    complete.add_argument("location", help="FILE:LINE:COL, line and column counted from 1")
    complete.add_argument("--model", help="models.toml name or path to a .gguf file")
    complete.add_argument("--max-tokens", type=_int_in(1, MAX_TOKENS), default=64, metavar="N",
                          help=f"longest suggestion, in tokens (1 to {MAX_TOKENS}; default 64)")
    complete.add_argument("--threads", type=_int_in(0, MAX_THREADS), default=None, metavar="N",
                          help=f"CPU threads (1 to {MAX_THREADS}; 0 or unset: as many as suit "
                          "the machine)")

    demo = sub.add_parser("demo", help="watch the server suggest code while a file is typed")
    demo.add_argument("--model", help="models.toml name or path to a .gguf file")
    demo.add_argument("--file", help="source file to type (default: a bundled sample)")
    demo.add_argument("--lines", type=_int_in(1), default=4,
                      help="how many lines to type (at least 1; default 4)")

    sub.add_parser("bench", help="benchmark speed and quality against baselines (see --help)")

    doctor = sub.add_parser("doctor", help="check Python, llama.cpp, the model and the cache")
    doctor.add_argument("--model", help="models.toml name or path to a .gguf file")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")

    models = sub.add_parser("models", help="list, pull and locate models")
    models_sub = models.add_subparsers(dest="models_command", required=True)
    models_sub.add_parser("list", help="every entry of models.toml and whether it is present")
    pull = models_sub.add_parser("pull", help="fetch a model into the cache folder")
    pull.add_argument("name")
    path = models_sub.add_parser("path", help="print the local path of a pulled model")
    path.add_argument("name")
    return parser


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        # The benchmark parses its own options (argparse cannot pass "--quick" through).
        from lsp_complete.bench import main as bench_main

        logging.basicConfig(level="WARNING", stream=sys.stderr)
        sys.exit(bench_main(argv[1:]))
    args = _build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    sys.exit(_dispatch(args))


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "models":
        from lsp_complete import model_store

        if args.models_command == "list":
            return model_store.cli_list()
        if args.models_command == "pull":
            return model_store.cli_pull(args.name)
        return model_store.cli_path(args.name)
    if args.command == "serve":
        if args.token_file is not None and args.tcp is None:
            print("lsp-complete serve: --token-file needs --tcp", file=sys.stderr)
            return 2
        from lsp_complete.daemon.control import wanted

        refused = None  # why the daemon that was wanted could not be had
        if wanted(args.tcp is not None, args.no_daemon, args.api_key_env):
            from lsp_complete.daemon.forwarder import serve_via_daemon

            code = serve_via_daemon(args.model, args.max_message_bytes, args.log_level.upper())
            if isinstance(code, int):
                return code
            refused = code
        from lsp_complete.server import run_server

        return run_server(tcp_port=args.tcp, model=args.model,
                          max_message_bytes=args.max_message_bytes,
                          token_file=args.token_file, api_key_env=args.api_key_env,
                          notice=refused)
    if args.command == "daemon":
        from lsp_complete.daemon import control

        if args.daemon_command == "status":
            return control.cli_status(as_json=args.json)
        if args.daemon_command == "stop":
            return control.cli_stop()
        return control.cli_run(args.idle_minutes, args.model, args.model_socket)
    if args.command == "complete":
        from lsp_complete.oneshot import cli_complete

        return cli_complete(args.location, args.model, args.max_tokens, args.threads)
    if args.command == "doctor":
        from lsp_complete.doctor import cli_doctor

        return cli_doctor(model=args.model, as_json=args.json)
    if args.command == "demo":
        from lsp_complete.demo import run_demo

        return run_demo(model=args.model, file=args.file, lines=args.lines)
    return 2
