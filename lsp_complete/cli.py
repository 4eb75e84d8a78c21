"""Command line: `lsp-complete serve | complete | demo | bench | models`."""

from __future__ import annotations

import argparse
import logging
import sys

from lsp_complete import __version__


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lsp-complete",
        description="Fast local inline code completion over the Language Server Protocol.",
    )
    parser.add_argument("--log-level", default="WARNING", help="Python logging level")
    parser.add_argument("--version", action="version", version=f"lsp-complete {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the language server (stdio by default)")
    serve.add_argument("--tcp", type=int, metavar="PORT", help="listen on 127.0.0.1:PORT")
    # Many LSP clients add --stdio on their own (vscode-languageclient, LSP4IJ): accept it.
    serve.add_argument("--stdio", action="store_true", help="talk LSP over stdio (the default)")
    serve.add_argument("--model", help="models.toml name or path to a .gguf file")

    complete = sub.add_parser("complete", help="one-shot completion at FILE:LINE:COL (1-based)")
    complete.add_argument("location", help="FILE:LINE:COL, line and column counted from 1")
    complete.add_argument("--model", help="models.toml name or path to a .gguf file")
    complete.add_argument("--max-tokens", type=int, default=64)
    complete.add_argument("--threads", type=int, default=None)

    demo = sub.add_parser("demo", help="watch the server suggest code while a file is typed")
    demo.add_argument("--model", help="models.toml name or path to a .gguf file")
    demo.add_argument("--file", help="source file to type (default: a bundled sample)")
    demo.add_argument("--lines", type=int, default=4, help="how many lines to type")

    sub.add_parser("bench", help="benchmark speed and quality against baselines (see --help)")

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
        from lsp_complete.server import run_server

        return run_server(tcp_port=args.tcp, model=args.model)
    if args.command == "complete":
        from lsp_complete.oneshot import cli_complete

        return cli_complete(args.location, args.model, args.max_tokens, args.threads)
    if args.command == "demo":
        from lsp_complete.demo import run_demo

        return run_demo(model=args.model, file=args.file, lines=args.lines)
    return 2
