"""The language server, one module per job:

- `protocol`: what is on the wire (our method names, pygls' protocol adjusted);
- `framing`: bytes to messages for one connection (our reader, pygls dispatches);
- `tcp`: TCP mode: the launch's token, one authenticated client at a time;
- `handlers`: one small function per LSP feature, each delegating; `create_server`, `run_server`;
- `completion_server`: the server object, its shared settings, worker and messages to the user;
- `model`: loading and reloading the model; `files`: open documents, their state, idle work;
- `completion`: suggestion requests and the edit the client gets; `status`: telemetry.
"""

from lsp_complete.server.completion_server import CompletionServer
from lsp_complete.server.handlers import create_server, run_server
from lsp_complete.server.protocol import ACCEPT_COMMAND, CURSOR_METHOD, SECTION, STATUS_METHOD

__all__ = [
    "ACCEPT_COMMAND",
    "CURSOR_METHOD",
    "SECTION",
    "STATUS_METHOD",
    "CompletionServer",
    "create_server",
    "run_server",
]
