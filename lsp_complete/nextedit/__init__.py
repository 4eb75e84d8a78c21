"""Next-edit suggestions, the pure parts: a file's recent edits (`history`), the prompt of a
model's format and its answer read back and guarded (`prompt`), the smallest replacement
(`diff`). The worker's part is `pipeline.next_edit`, the server's `server.next_edit`."""
