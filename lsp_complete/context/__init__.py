"""What the model sees: a stable head, a window before the anchor, the suffix and the middle.

The prompt is ``<head><fim_prefix>before<fim_suffix>suffix<fim_middle>middle``. Typing at the
cursor only appends to ``middle``, so everything before it keeps its KV cache. Everything here is
built so that it changes as rarely as possible:

* ``head`` comes from the syntax tree's *structure* (imports, an outline of definitions outside
  the window, headers of the scopes around the cursor), never from the text of a body, and from
  ``Document.structure_tree``, which does not follow half-typed statements;
* ``before`` starts on a coarse line grid, so moving the anchor down appends to it;
* ``suffix`` depends on the cursor line, which typing on it does not change.

The package, by concern:

* `limits`      - `ContextLimits` (window sizes) and `CodeContext` (the four parts), plain data;
* `window`      - the anchor policy and the ``before`` / ``suffix`` / ``middle`` windows;
* `head`        - the stable head (imports, outline, enclosing headers);
* `nodes`       - per-grammar questions about tree-sitter nodes, used by the head;
* `block_shape` - whether a suggestion should be a block, and the enclosing block's indent;
* `text`        - small helpers over a Document's text shared by the others;
* `imports`     - what a file imports, and the workspace files that names (per language);
* `repo`        - the repository block: outlines of imported definitions, similar code.

`RepoContext` (limits.py) is the repository block as the prompt sees it; `repo` and `imports`
read other files through `lsp_complete.workspace` only, off the event loop.

Language knowledge (grammars, node types, block opener and shape) comes from `languages.py`
through ``Document.spec``; nothing here is keyed by a raw languageId.
"""

from lsp_complete.context.block_shape import (
    among_statements,
    block_may_follow,
    definition_brace_own_line,
    enclosing_block_indent,
    open_above,
    statements_indent,
    wants_multiline,
)
from lsp_complete.context.head import build_head
from lsp_complete.context.limits import (
    CodeContext,
    ContextLimits,
    RepoContext,
    RepoFile,
    cold_limits,
)
from lsp_complete.context.window import (
    build_context,
    choose_anchor,
    display_path,
    window_start_line,
)

__all__ = [
    "CodeContext",
    "ContextLimits",
    "RepoContext",
    "RepoFile",
    "build_context",
    "build_head",
    "choose_anchor",
    "cold_limits",
    "definition_brace_own_line",
    "display_path",
    "enclosing_block_indent",
    "open_above",
    "statements_indent",
    "wants_multiline",
    "among_statements",
    "block_may_follow",
    "window_start_line",
]
