"""Whether a process is alive, and whether the editor's process can be watched (LSP: a server
exits once the process that started it, initialize's `processId`, is gone)."""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

EDITOR_CHECK_S = 3.0  # how often the editor's process is looked for (vscode-languageclient: 3 s)


def process_alive(pid: int) -> bool:
    """Whether `pid` names a running process (POSIX: signal 0 asks without sending; on
    Windows os.kill would end the process, so it is never asked there: see `watchable`)."""
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's (alive), or no pid at all
        return True
    return True


def watchable(pid: object) -> int | None:
    """initialize's processId if it names a process here. One that does not is another
    machine's or container's (a server started over ssh or `docker exec`): watching it would
    end every such session at once."""
    if os.name != "posix" or not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    if not process_alive(pid):
        log.info("the editor's process %d is not on this machine: not watched", pid)
        return None
    return pid
