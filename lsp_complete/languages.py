"""Everything the server knows about a language, and the one place that resolves a languageId.

An LSP languageId (or a common alias such as "py", or a file extension) resolves here to a
`LanguageInfo`: its lexical `Syntax` (comments, string delimiters, block shape), which
post-processing lexes brackets with, and, for languages with a grammar, its `LanguageSpec` (the
tree-sitter grammar and the node types context needs). Every stage looks languages up here, so
an alias means the same language to all of them.

Grammars come only from the official per-language wheels that are installed with the package;
nothing is ever downloaded at run time. A language without a grammar (or an unknown one) still
completes, with plain-text context only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import PurePosixPath
from urllib.parse import unquote, urlparse

import tree_sitter


@dataclass(frozen=True)
class Syntax:
    """How a language's text is lexed: comments, string delimiters, and its block shape."""

    line_comments: tuple[str, ...] = ()
    block_comment: tuple[str, str] | None = None
    quotes: str = '"'  # characters that open a string ending on the same line
    long_quotes: tuple[str, ...] = ()  # delimiters of strings that may span lines
    raw_long: bool = False  # no backslash escapes inside long strings (Go raw strings)
    char_quote: bool = False  # ' opens only a char literal, otherwise a lifetime (Rust)
    # Block shape. Python-like: a line ending in ':' opens a block, which ends where the
    # indentation does. Otherwise blocks are delimited by braces.
    indent_scoped: bool = False

    @property
    def block_opener(self) -> str:
        return ":" if self.indent_scoped else "{"

    @property
    def comment_prefix(self) -> str:
        """What starts a one-line comment (used to write `# ...` markers into prompts)."""
        return self.line_comments[0] if self.line_comments else "//"


@dataclass(frozen=True)
class LanguageSpec:
    """What context needs to know about one grammar, as sets of node type names.

    The sets are deliberately shallow: the outline walks top-level nodes and the members of
    containers only, so a per-keystroke head never walks a whole tree.
    """

    name: str
    loader: Callable[[], object] = field(repr=False, compare=False)
    # Top-level statements kept verbatim at the top of the head (imports, package lines).
    imports: frozenset[str] = frozenset()
    # Definitions shown as a signature with the body elided (`def f(a): ...`).
    functions: frozenset[str] = frozenset()
    # Definitions whose members are outlined one by one (classes, impl blocks, namespaces).
    containers: frozenset[str] = frozenset()
    # Nodes that wrap one definition and add a prefix to it (decorators, `export`, templates).
    wrappers: frozenset[str] = frozenset()
    # Nodes whose children are treated as if they sat at the enclosing level (include guards,
    # `extern "C" {}`): they add no scope of their own.
    transparent: frozenset[str] = frozenset()
    # Short declarations kept whole in the outline (fields, type aliases, prototypes).
    verbatim: frozenset[str] = frozenset()
    # Items glued to the definition that follows them (Rust `#[derive(..)]` attributes).
    attached: frozenset[str] = frozenset()
    # Anonymous functions (callbacks, closures): their header line is an enclosing scope.
    anonymous: frozenset[str] = frozenset()
    # Block node types: the delimited bodies used for enclosing-block / multiline decisions.
    blocks: frozenset[str] = frozenset()
    comments: frozenset[str] = frozenset({"comment"})
    # The lexical side of the language: comment prefix, block opener and block shape.
    syntax: Syntax = field(default_factory=Syntax)

    @property
    def comment_prefix(self) -> str:
        return self.syntax.comment_prefix

    @property
    def block_opener(self) -> str:
        return self.syntax.block_opener

    @property
    def indent_scoped(self) -> bool:
        """Python-like languages: a block ends where the indentation does, not at a token."""
        return self.syntax.indent_scoped

    @property
    def elision(self) -> str:
        """Appended to a signature whose body is elided."""
        return " ..." if self.syntax.indent_scoped else " { ... }"

    @property
    def language(self) -> tree_sitter.Language:
        return _language(self.name)

    def parser(self) -> tree_sitter.Parser:
        """A parser for this grammar owned by the calling thread (parsers are not thread-safe)."""
        return _thread_parser(self.name)


def _load(module: str, attr: str = "language") -> Callable[[], object]:
    def loader() -> object:
        mod = __import__(module)
        return getattr(mod, attr)()

    return loader


# ---------------------------------------------------------------- lexical syntax
_C_LIKE = Syntax(("//",), ("/*", "*/"), "\"'")
_JS_LIKE = Syntax(("//",), ("/*", "*/"), "\"'", ("`",))
_HASH = Syntax(("#",), None, "\"'")
_PYTHON_SYNTAX = Syntax(("#",), None, "\"'", ('"""', "'''"), indent_scoped=True)
_GO_SYNTAX = Syntax(("//",), ("/*", "*/"), "\"'", ("`",), raw_long=True)
_RUST_SYNTAX = Syntax(("//",), ("/*", "*/"), '"', char_quote=True)
# Prose: apostrophes and quotes are not delimiters there.
_PROSE = Syntax(quotes="")
# Unknown languages: only double-quoted strings, no comments, so nothing is guessed.
DEFAULT_SYNTAX = Syntax()

# ---------------------------------------------------------------- grammars
_C_LIKE_BLOCKS = frozenset({"compound_statement", "field_declaration_list", "declaration_list",
                            "enumerator_list", "initializer_list"})
_JS_FUNCTIONS = frozenset({"function_declaration", "generator_function_declaration",
                           "method_definition", "lexical_declaration", "variable_declaration"})
_JS_ANON = frozenset({"arrow_function", "function_expression", "function",
                      "generator_function"})
_JS_BLOCKS = frozenset({"statement_block", "class_body", "object", "switch_body"})
_TS_EXTRA_VERBATIM = frozenset({"interface_declaration", "type_alias_declaration",
                                "enum_declaration", "function_signature", "ambient_declaration",
                                "public_field_definition", "abstract_method_signature",
                                "method_signature", "property_signature", "index_signature"})

_PYTHON = LanguageSpec(
    name="python",
    loader=_load("tree_sitter_python"),
    imports=frozenset({"import_statement", "import_from_statement", "future_import_statement"}),
    functions=frozenset({"function_definition"}),
    containers=frozenset({"class_definition"}),
    wrappers=frozenset({"decorated_definition"}),
    verbatim=frozenset({"expression_statement", "type_alias_statement"}),
    anonymous=frozenset(),
    blocks=frozenset({"block"}),
    syntax=_PYTHON_SYNTAX,
)

_JAVASCRIPT = LanguageSpec(
    name="javascript",
    loader=_load("tree_sitter_javascript"),
    imports=frozenset({"import_statement"}),
    functions=_JS_FUNCTIONS,
    containers=frozenset({"class_declaration", "class"}),
    wrappers=frozenset({"export_statement"}),
    verbatim=frozenset({"field_definition"}),
    anonymous=_JS_ANON,
    blocks=_JS_BLOCKS,
    syntax=_JS_LIKE,
)

_TYPESCRIPT = LanguageSpec(
    name="typescript",
    loader=_load("tree_sitter_typescript", "language_typescript"),
    imports=frozenset({"import_statement", "import_alias"}),
    functions=_JS_FUNCTIONS,
    containers=frozenset({"class_declaration", "abstract_class_declaration", "class",
                          "internal_module"}),
    wrappers=frozenset({"export_statement"}),
    verbatim=frozenset({"field_definition"}) | _TS_EXTRA_VERBATIM,
    anonymous=_JS_ANON,
    blocks=_JS_BLOCKS | {"interface_body", "enum_body", "object_type"},
    syntax=_JS_LIKE,
)

_TSX = LanguageSpec(
    name="tsx",
    loader=_load("tree_sitter_typescript", "language_tsx"),
    imports=_TYPESCRIPT.imports,
    functions=_TYPESCRIPT.functions,
    containers=_TYPESCRIPT.containers,
    wrappers=_TYPESCRIPT.wrappers,
    verbatim=_TYPESCRIPT.verbatim,
    anonymous=_TYPESCRIPT.anonymous,
    blocks=_TYPESCRIPT.blocks,
    syntax=_TYPESCRIPT.syntax,
)

_GO = LanguageSpec(
    name="go",
    loader=_load("tree_sitter_go"),
    imports=frozenset({"package_clause", "import_declaration"}),
    functions=frozenset({"function_declaration", "method_declaration"}),
    verbatim=frozenset({"type_declaration", "const_declaration", "var_declaration"}),
    anonymous=frozenset({"func_literal"}),
    blocks=frozenset({"block", "field_declaration_list", "interface_type",
                      "literal_value", "expression_switch_statement", "type_switch_statement",
                      "select_statement"}),
    syntax=_GO_SYNTAX,
)

_RUST = LanguageSpec(
    name="rust",
    loader=_load("tree_sitter_rust"),
    imports=frozenset({"use_declaration", "extern_crate_declaration"}),
    functions=frozenset({"function_item"}),
    containers=frozenset({"impl_item", "trait_item", "mod_item"}),
    verbatim=frozenset({"struct_item", "enum_item", "union_item", "type_item", "const_item",
                        "static_item", "function_signature_item", "macro_definition",
                        "associated_type"}),
    attached=frozenset({"attribute_item"}),
    anonymous=frozenset({"closure_expression"}),
    blocks=frozenset({"block", "declaration_list", "field_declaration_list",
                      "enum_variant_list", "match_block"}),
    syntax=_RUST_SYNTAX,
)

_JAVA = LanguageSpec(
    name="java",
    loader=_load("tree_sitter_java"),
    imports=frozenset({"package_declaration", "import_declaration"}),
    functions=frozenset({"method_declaration", "constructor_declaration",
                         "compact_constructor_declaration"}),
    containers=frozenset({"class_declaration", "interface_declaration", "enum_declaration",
                          "record_declaration", "annotation_type_declaration"}),
    transparent=frozenset({"enum_body_declarations"}),
    verbatim=frozenset({"field_declaration", "constant_declaration", "enum_constant",
                        "annotation_type_element_declaration"}),
    anonymous=frozenset({"lambda_expression"}),
    blocks=frozenset({"block", "class_body", "interface_body", "enum_body",
                      "constructor_body", "switch_block", "annotation_type_body"}),
    syntax=_C_LIKE,
)

_C = LanguageSpec(
    name="c",
    loader=_load("tree_sitter_c"),
    imports=frozenset({"preproc_include"}),
    functions=frozenset({"function_definition"}),
    containers=frozenset({"struct_specifier", "union_specifier"}),
    transparent=frozenset({"preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif",
                           "linkage_specification", "declaration_list"}),
    verbatim=frozenset({"declaration", "type_definition", "enum_specifier", "preproc_def",
                        "preproc_function_def", "field_declaration"}),
    blocks=_C_LIKE_BLOCKS,
    syntax=_C_LIKE,
)

_CPP = LanguageSpec(
    name="cpp",
    loader=_load("tree_sitter_cpp"),
    imports=frozenset({"preproc_include", "using_declaration"}),
    functions=frozenset({"function_definition"}),
    containers=frozenset({"class_specifier", "struct_specifier", "union_specifier",
                          "namespace_definition"}),
    wrappers=frozenset({"template_declaration"}),
    transparent=_C.transparent,
    verbatim=_C.verbatim | {"alias_declaration", "access_specifier", "concept_definition",
                            "friend_declaration"},
    anonymous=frozenset({"lambda_expression"}),
    blocks=_C_LIKE_BLOCKS,
    syntax=_C_LIKE,
)

# ---------------------------------------------------------------- languages
@dataclass(frozen=True)
class LanguageInfo:
    """One language: the names clients use for it, its syntax and, if it has one, its grammar."""

    name: str  # also one of its languageIds
    syntax: Syntax
    grammar: LanguageSpec | None = None  # None: plain-text context only
    aliases: tuple[str, ...] = ()  # more LSP languageIds and common aliases, lower case
    extensions: tuple[str, ...] = ()  # file extensions, for clients that send no useful id


def _with_grammar(spec: LanguageSpec, aliases: tuple[str, ...],
                  extensions: tuple[str, ...]) -> LanguageInfo:
    return LanguageInfo(spec.name, spec.syntax, spec, aliases, extensions)


_LANGUAGES = (
    _with_grammar(_PYTHON, ("py",), (".py", ".pyi", ".pyw")),
    _with_grammar(_JAVASCRIPT, ("javascriptreact", "js", "jsx"),
                  (".js", ".mjs", ".cjs", ".jsx")),
    _with_grammar(_TYPESCRIPT, ("ts",), (".ts", ".mts", ".cts")),
    _with_grammar(_TSX, ("typescriptreact",), (".tsx",)),
    _with_grammar(_GO, ("golang",), (".go",)),
    _with_grammar(_RUST, ("rs",), (".rs",)),
    _with_grammar(_JAVA, (), (".java",)),
    _with_grammar(_C, (), (".c", ".h")),
    _with_grammar(_CPP, ("c++", "cuda-cpp", "objective-cpp"),
                  (".cc", ".cpp", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++", ".ipp", ".inl",
                   ".cu")),
    # Languages without a grammar: brackets and strings are still lexed right in their text.
    LanguageInfo("csharp", _C_LIKE, aliases=("c#", "cs"), extensions=(".cs",)),
    LanguageInfo("kotlin", Syntax(("//",), ("/*", "*/"), "\"'", ('"""',)),
                 extensions=(".kt", ".kts")),
    LanguageInfo("swift", Syntax(("//",), ("/*", "*/"), '"', ('"""',)), extensions=(".swift",)),
    LanguageInfo("scala", Syntax(("//",), ("/*", "*/"), "\"'", ('"""',)),
                 extensions=(".scala", ".sc")),
    LanguageInfo("php", Syntax(("//", "#"), ("/*", "*/"), "\"'"), extensions=(".php",)),
    LanguageInfo("ruby", _HASH, aliases=("rb",), extensions=(".rb", ".rake", ".gemspec")),
    LanguageInfo("shellscript", _HASH, aliases=("sh", "bash", "zsh", "shell"),
                 extensions=(".sh", ".bash", ".zsh")),
    LanguageInfo("perl", _HASH, extensions=(".pl", ".pm")),
    LanguageInfo("r", _HASH, extensions=(".r",)),
    LanguageInfo("yaml", _HASH, aliases=("yml",), extensions=(".yaml", ".yml")),
    LanguageInfo("toml", _HASH, extensions=(".toml",)),
    LanguageInfo("elixir", _HASH, extensions=(".ex", ".exs")),
    LanguageInfo("julia", _HASH, extensions=(".jl",)),
    LanguageInfo("lua", Syntax(("--",), None, "\"'"), extensions=(".lua",)),
    LanguageInfo("sql", Syntax(("--",), ("/*", "*/"), "\"'"), extensions=(".sql",)),
    LanguageInfo("haskell", Syntax(("--",), ("{-", "-}"), '"'), extensions=(".hs",)),
    LanguageInfo("plaintext", _PROSE),
    LanguageInfo("markdown", _PROSE, aliases=("md",), extensions=(".md", ".markdown")),
)

_BY_ID = {name: lang for lang in _LANGUAGES for name in (lang.name, *lang.aliases)}
_BY_EXTENSION = {ext: lang for lang in _LANGUAGES for ext in lang.extensions}
_SPECS = {lang.name: lang.grammar for lang in _LANGUAGES if lang.grammar is not None}


def code_languages() -> dict[str, tuple[str, ...]]:
    """Every language known here that is code, not prose, with its file extensions (the
    table's order: those with a grammar first)."""
    return {lang.name: lang.extensions for lang in _LANGUAGES
            if lang.syntax is not _PROSE and lang.extensions}


def language_info(language_id: str | None) -> LanguageInfo | None:
    """The language an LSP languageId or alias names (case and spaces ignored: a client may
    send a display name, "Shell Script"); None if unknown."""
    return _BY_ID.get("".join((language_id or "").split()).lower())


def syntax_for(language_id: str | None) -> Syntax:
    """The lexer settings for a languageId or alias; `DEFAULT_SYNTAX` for an unknown one."""
    info = language_info(language_id)
    return info.syntax if info is not None else DEFAULT_SYNTAX


def language_of_path(path: str) -> str:
    """The languageId of a file by its extension ("plaintext" when unknown)."""
    info = _by_extension(path)
    return info.name if info is not None else "plaintext"


def _by_extension(path: str) -> LanguageInfo | None:
    return _BY_EXTENSION.get(PurePosixPath(path).suffix.lower())


# Languages a file may rightly be sent as though its extension names the other: a .h file as
# C++, a .js file as TypeScript or JSX.
_KIN = (frozenset({"c", "cpp"}), frozenset({"javascript", "typescript", "tsx"}))


def _kin(a: str, b: str) -> bool:
    return a == b or any(a in kin and b in kin for kin in _KIN)


def _resolve(language_id: str | None, uri: str | None) -> LanguageInfo | None:
    """The language a document is in: the one its languageId names, unless that id is
    unknown, prose ("plaintext" from a client that does not know the language), or a language
    the file's extension rules out; then the extension's. Eglot sends every file of a server
    the id of the mode the server started in (1.9; joaotavora/eglot#1384 in 2024): a .js
    file as "python". An id of the extension's kin still wins (a .h file sent as C++)."""
    info = language_info(language_id)
    by_extension = _by_extension(_uri_path(uri)) if uri else None
    if by_extension is None:
        return info
    if info is None or info.syntax is _PROSE or not _kin(info.name, by_extension.name):
        return by_extension
    return info


def language_name(language_id: str | None, uri: str | None = None) -> str:
    """The name of the language a document is in (`_resolve`), else the id as sent."""
    info = _resolve(language_id, uri)
    return info.name if info is not None else (language_id or "plaintext")


def setting_keys(language_id: str | None, uri: str | None = None) -> tuple[str, ...]:
    """The keys a per-language setting (`enabled`) is looked up by, the first found winning:
    the languageId as sent (editors' ids: "javascriptreact"), unless it names another
    language than the file is read as (Eglot's one id: "python" for a .js file), then the
    name of the language read ("javascript")."""
    read = language_name(language_id, uri)
    sent = (language_id or "").strip()
    named = language_info(sent)
    keys = [sent] if sent and (named is None or named.name == read) else []
    return tuple(keys + [read] if read not in keys else keys)


def spec_for(language_id: str | None, uri: str | None = None) -> LanguageSpec | None:
    """The grammar of the language a document is in (`_resolve`); None without one."""
    info = _resolve(language_id, uri)
    if info is None or info.grammar is None:
        return None
    return info.grammar if _available(info.name) else None


def language_for(language_id: str | None, uri: str | None = None) -> tree_sitter.Language | None:
    spec = spec_for(language_id, uri)
    return spec.language if spec is not None else None


def parser_for(language_id: str | None, uri: str | None = None) -> tree_sitter.Parser | None:
    spec = spec_for(language_id, uri)
    return spec.parser() if spec is not None else None


def supported_languages() -> list[str]:
    """Grammar names whose wheel is installed (for `status` and docs)."""
    return [name for name in _SPECS if _available(name)]


def _uri_path(uri: str) -> str:
    if "://" in uri or uri.startswith("file:"):
        return unquote(urlparse(uri).path)
    return uri


@cache
def _language(name: str) -> tree_sitter.Language:
    return tree_sitter.Language(_SPECS[name].loader())


@cache
def _available(name: str) -> bool:
    # A missing grammar wheel degrades that language to plain text instead of failing.
    try:
        _language(name)
    except (ImportError, AttributeError, ValueError):
        return False
    return True


_local = threading.local()


def _thread_parser(name: str) -> tree_sitter.Parser:
    parsers: dict[str, tree_sitter.Parser] | None = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get(name)
    if parser is None:
        parser = parsers[name] = tree_sitter.Parser(_language(name))
    return parser
