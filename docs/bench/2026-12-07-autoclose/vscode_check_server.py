"""The real server with every session's options pointed at a scripted remote engine (for
vscode_check.py: the extension passes only its own settings)."""

import json
import os
import sys

from lsp_complete import config

_parse = config.parse_settings
EXTRA = json.loads(os.environ["VSCHECK_EXTRA"])


def _with_extra(options, base=None):  # type: ignore[no-untyped-def]
    return _parse({**options, **EXTRA} if isinstance(options, dict) else options, base)


config.parse_settings = _with_extra  # before the server's modules import it

from lsp_complete.cli import main  # noqa: E402

sys.exit(main(["serve", *sys.argv[1:]]))
