"""The shared per-user engine daemon (`lsp-complete serve` connects to it, like
`gopls -remote=auto`): one model, one worker and one KV cache for every editor window.

- `paths`: the runtime folder (0700, this user's), the socket, lock and log files;
- `hello`: the first line on a connection (version handshake, what the client wants);
- `start`: connect-or-start under a lock, stale sockets, retiring another version's daemon;
- `forwarder`: `serve`'s frontend: pipes the editor's LSP bytes, replays the session to a
  restarted daemon; light on purpose (no pygls, no engine);
- `server`: the daemon: sessions of their own over one shared engine and scheduler;
- `control`: `lsp-complete daemon status | stop | run`.

Importing this package stays cheap: only `paths` is loaded here.
"""

from lsp_complete.daemon.paths import NO_DAEMON_ENV, runtime_dir, socket_path

__all__ = ["NO_DAEMON_ENV", "runtime_dir", "socket_path"]
