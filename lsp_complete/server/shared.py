"""What the server's parts that serve files (OpenFiles, Suggester, NextEdits) all use, handed
over as one: the current settings (through a callable: they change), the editor client, the
worker (scheduler), the model and the telemetry. Each part still names what else it uses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lsp_complete.config import Settings
from lsp_complete.scheduler import Scheduler
from lsp_complete.server.client import EditorClient
from lsp_complete.server.model import ModelHost
from lsp_complete.server.telemetry import Telemetry


@dataclass(frozen=True)
class Shared:
    settings: Callable[[], Settings]
    client: EditorClient
    scheduler: Scheduler
    model: ModelHost
    telemetry: Telemetry
