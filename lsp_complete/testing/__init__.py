"""Test support shipped with the package: the tiny GGUF writer (the test suite, `bench --quick`)
and `lsp_client`, the LSP client helper (the test suite, `bench` and `demo`)."""

from lsp_complete.testing.tiny_gguf import write_tiny_gguf

__all__ = ["write_tiny_gguf"]
