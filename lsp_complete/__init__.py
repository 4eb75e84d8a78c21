"""lsp-complete: fast local inline code completion over LSP."""

__version__ = "0.1.0"
