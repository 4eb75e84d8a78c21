"""The real server with every session's options pointed at a scripted remote engine (for
vscode_callback.py: the extension passes only its own settings)."""

import json
import os
import sys

from lsp_complete import config

_parse = config.parse_settings
EXTRA = json.loads(os.environ["VSCHECK_EXTRA"])


def _with_extra(options, base=None):  # type: ignore[no-untyped-def]
    return _parse({**options, **EXTRA} if isinstance(options, dict) else options, base)


config.parse_settings = _with_extra  # before the server's modules import it

if os.environ.get("VSCHECK_KEEP_PAREN"):  # the reverted variant: the editor's `)` stays
    import importlib

    from lsp_complete import postprocess

    prepare = importlib.import_module("lsp_complete.pipeline.prepare")

    _through = postprocess.types_through

    def _keep(text, prefix, suffix, lang):  # type: ignore[no-untyped-def]
        if postprocess._opens_ahead_of_the_closers(text, prefix, lang):
            return 0
        return _through(text, prefix, suffix, lang)

    postprocess.types_through = _keep
    prepare.types_through = _keep

from lsp_complete.cli import main  # noqa: E402

sys.exit(main(["serve", *sys.argv[1:]]))
