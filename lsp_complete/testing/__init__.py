"""Test support shipped with the package (used by the test suite and `bench --quick`)."""

from lsp_complete.testing.tiny_gguf import write_tiny_gguf

__all__ = ["write_tiny_gguf"]
