"""Golden cases for post-processing: one TOML file per rule, plus a negative corpus.

Each rule file must contain at least one case that fails with that rule disabled, so a rule that
stops doing anything (or is dropped from the pipeline) is caught.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lsp_complete.languages import spec_for, syntax_for
from lsp_complete.postprocess import (
    RULE_NAMES,
    CompletionSite,
    balance_brackets,
    clean_completion,
    copying_next_line,
    count_block_lines,
    dedupe_suffix,
    indent_width,
    strip_controls,
    strip_special_tokens,
    trim_whitespace,
    truncate_lines,
)

DATA = Path(__file__).parent / "data" / "postprocess"
NEGATIVE_FILE = "negative_corpus"
CASE_FIELDS = {
    "name",
    "raw",
    "line_prefix",
    "line_suffix",
    "suffix",
    "multiline",
    "block_indent",
    "language_id",
    "expected",
    "stop",
    "family",
    "forbidden",
    "open_above",
    "brace_own_line",
    "replace_line_suffix",
}
# Control-token spellings that must never reach the editor, whatever the model family.
LEAKS = ("<|", "|>", "<｜", "<fim_", "<fim-", "<file_sep>", "<PRE>", "<SUF>", "<MID>", "<EOT>")


@dataclass(frozen=True)
class Case:
    file: str
    name: str
    raw: str
    site: CompletionSite
    stop: tuple[str, ...]
    expected: str | None
    forbidden: tuple[str, ...]
    family: str


def _case(file: str, data: dict[str, Any]) -> Case:
    unknown = set(data) - CASE_FIELDS
    assert not unknown, f"{file}: {data.get('name')}: unknown fields {unknown}"
    line_suffix = data.get("line_suffix", "")
    suffix = data.get("suffix", line_suffix)
    assert suffix.startswith(line_suffix), f"{file}: {data['name']}: suffix must start with it"
    assert "\n" not in line_suffix and "\n" not in data["line_prefix"], data["name"]
    site = CompletionSite.make(
        data["line_prefix"],
        suffix,
        block_indent=data.get("block_indent", -1),
        multiline=data.get("multiline", False),
        language_id=data.get("language_id", "python"),
        open_above=data.get("open_above", ""),
        brace_own_line=data.get("brace_own_line", False),
        replace_line_suffix=data.get("replace_line_suffix", False),
    )
    assert site.line_suffix == line_suffix, data["name"]
    return Case(
        file=file,
        name=data["name"],
        raw=data["raw"],
        site=site,
        stop=tuple(data.get("stop", ())),
        expected=data.get("expected"),
        forbidden=tuple(data.get("forbidden", ())),
        family=data.get("family", ""),
    )


def _load(file: str) -> list[Case]:
    with open(DATA / f"{file}.toml", "rb") as f:
        cases = [_case(file, item) for item in tomllib.load(f)["case"]]
    names = [case.name for case in cases]
    assert len(names) == len(set(names)), f"{file}: duplicate case names"
    return cases


RULE_CASES = {rule: _load(rule) for rule in RULE_NAMES}
NEGATIVE_CASES = _load(NEGATIVE_FILE)
ALL_CASES = [case for cases in RULE_CASES.values() for case in cases] + NEGATIVE_CASES


def _clean(case: Case, disabled: frozenset[str] = frozenset()) -> str:
    return clean_completion(case.raw, case.site, case.stop, disabled=disabled)


def _id(case: Case) -> str:
    return f"{case.file}:{case.name}"


def test_every_rule_and_only_rules_have_a_case_file() -> None:
    files = {path.stem for path in DATA.glob("*.toml")}
    assert files == set(RULE_NAMES) | {NEGATIVE_FILE}


@pytest.mark.parametrize("case", [c for c in ALL_CASES if c.expected is not None], ids=_id)
def test_golden(case: Case) -> None:
    assert _clean(case) == case.expected


@pytest.mark.parametrize("rule", RULE_NAMES)
def test_each_rule_is_needed_by_its_cases(rule: str) -> None:
    failing = [c.name for c in RULE_CASES[rule] if _clean(c, frozenset({rule})) != c.expected]
    assert failing, f"no case in {rule}.toml needs the {rule} rule"


@pytest.mark.parametrize("rule", RULE_NAMES)
def test_rule_files_cover_the_main_languages(rule: str) -> None:
    languages = {case.site.language_id for case in RULE_CASES[rule]}
    assert {"python", "go", "rust"} <= languages
    assert languages & {"javascript", "typescript", "typescriptreact"}


@pytest.mark.parametrize("case", ALL_CASES, ids=_id)
def test_invariants(case: Case) -> None:
    """What no output may ever be, for every input in every file."""
    out = _clean(case)
    for leak in LEAKS + case.forbidden:
        assert leak not in out
    assert out == "" or out.strip(), "whitespace-only suggestion"
    assert not (out and case.site.suffix.startswith(out)), "repeats the text after the cursor"
    if not case.site.multiline:
        assert "\n" not in out
    for line in out.split("\n")[:-1]:
        assert line == line.rstrip(), "trailing whitespace"


def test_negative_corpus_covers_model_families() -> None:
    families = {case.family for case in NEGATIVE_CASES}
    assert {"qwen", "starcoder", "deepseek", "codellama", "codestral", "codegemma"} <= families
    raw = "".join(case.raw for case in NEGATIVE_CASES)
    tokens = ("<|endoftext|>", "<|file_sep|>", "<fim_middle>", "<｜end▁of▁sentence｜>", "<EOT>")
    for token in tokens:
        assert token in raw


# Direct unit checks of behaviour the golden files cannot express.


def _site(line_prefix: str, suffix: str = "", **kw: Any) -> CompletionSite:
    return CompletionSite.make(line_prefix, suffix, **kw)


def test_site_make_derives_line_suffix_and_indent() -> None:
    site = _site("    x = ", "foo)\n    y\n", block_indent=0, language_id="python")
    assert site.line_suffix == "foo)"
    assert site.indent == "    "
    assert _site("  ", "  pass").indent == "    "  # cursor inside the indentation


def test_unknown_disabled_rule_is_an_error() -> None:
    with pytest.raises(ValueError):
        clean_completion("x", _site(""), disabled={"no_such_rule"})


def test_stop_strings_cut_at_the_earliest() -> None:
    assert strip_special_tokens("a\nb</s>c", ["</s>", "\n"]) == "a"
    assert strip_special_tokens("abc", ["", "zz"]) == "abc"
    assert strip_special_tokens("x = 1<|endoftext") == "x = 1"


def test_subscript_named_like_a_marker_is_code() -> None:
    assert strip_special_tokens("cache[PREFIX] = 1") == "cache[PREFIX] = 1"
    assert strip_special_tokens("x = 1\n[SUFFIX]y") == "x = 1\n"


BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_strip_controls_removes_exactly_the_controls_and_bidi_characters() -> None:
    controls = [chr(c) for c in range(0xA0) if chr(c) not in "\t\n" and not 0x20 <= c < 0x7F]
    for ch in controls + list(BIDI):
        assert strip_controls(f"a{ch}b") == "ab", ascii(ch)
    # What text may hold: tab, newline, CRLF as a newline, printable ASCII, NBSP, the joiners
    # emoji need, other scripts, astral characters.
    kept = "\t\n" + "".join(chr(c) for c in range(0x20, 0x7F)) + "\u00a0\u200d\u05d0\U0001f600"
    assert strip_controls(kept) == kept
    assert strip_controls("a\r\nb\rc\r") == "a\nbc"


def test_removed_controls_are_logged_once_per_text(caplog: pytest.LogCaptureFixture) -> None:
    site = _site("x = ", "\n")
    with caplog.at_level("WARNING", logger="lsp_complete.postprocess"):
        assert clean_completion("f(1)\r\n", site) == "f(1)"  # a CRLF is not worth a word
        assert not caplog.records
        assert clean_completion("\x1b[2Jf(\x00\u202e1)", site) == "[2Jf(1)"
    assert [r.getMessage() for r in caplog.records] == [
        "removed 3 control characters from the engine's text: U+0000, U+001B, U+202E"]


def test_truncate_respects_max_lines() -> None:
    site = _site("def f():", "", multiline=True, block_indent=-1)
    raw = "\n" + "\n".join(f"    x{i} = {i}" for i in range(20))
    assert truncate_lines(raw, site, max_lines=4).count("\n") == 3
    assert len(clean_completion(raw, site, max_lines=4).split("\n")) == 4


def test_indent_width_counts_characters() -> None:
    assert indent_width("\t\tx") == 2
    assert indent_width("    x") == 4
    assert indent_width("") == 0


def test_rules_leave_empty_text_alone() -> None:
    site = _site("x = ", ")", language_id="python")
    assert dedupe_suffix("", site) == ""
    assert balance_brackets("", site) == ""
    assert trim_whitespace("  \n \t", site) == ""


def test_count_block_lines_counts_blank_lines_inside_the_block() -> None:
    """A generator may stop once a complete line is not kept; a blank line is not a stop."""
    site = _site("def f():", "", multiline=True, block_indent=-1, language_id="python")
    assert count_block_lines("\n    a = 1\n\n    b = 2", site) == 4
    assert count_block_lines("\n    a = 1\n\ndef g():\n    pass", site) == 3


NEXT_LINE = '        fprintf(stderr, "Usage: %s <xml-file>\\n", argv[0]);'


def test_copying_the_next_line_is_abandoned_only_when_dedupe_would_drop_it() -> None:
    """Generation may stop early only on text that post-processing drops anyway."""
    site = _site("        fpr", "\n" + NEXT_LINE + "\n        return(1);\n", language_id="c")
    whole = NEXT_LINE[len("        fpr"):]
    assert clean_completion(whole, site) == ""  # the finished copy is dropped...
    assert copying_next_line(whole[:24], site)  # ...so generation stops 24 characters in
    assert not copying_next_line(whole[:23], site)  # a shared start is not a copy yet
    # Diverging from the next line, or after a line break, it is a suggestion of its own.
    assert not copying_next_line('intf(stderr, "Error: bad args', site)
    assert not copying_next_line(whole[:30] + "\n", site)
    # Text after the cursor on its line: the dedupe rule does not treat it as a whole line.
    in_front = _site("        fpr", ")\n" + NEXT_LINE + "\n", language_id="c")
    assert not copying_next_line(whole[:30], in_front)
    # Blank lines between the cursor line and the copied one do not matter.
    spaced = _site("        fpr", "\n\n" + NEXT_LINE + "\n", language_id="c")
    assert copying_next_line(whole[:30], spaced)
    assert clean_completion(whole, spaced) == ""


# An alias names the same language to every stage: before languages.py resolved aliases for
# post-processing too, "py" got Python context but the default lexer (only `"` strings), which
# took the `)` inside these strings for closers and cut the suggestion there.
@pytest.mark.parametrize(
    ("alias", "line_prefix", "raw", "expected"),
    [
        ("py", "print(", "'it)s')", "'it)s'"),
        ("Python", "print(", "'it)s')", "'it)s'"),
        ("js", "log(", "`a)b`)", "`a)b`"),
        ("tsx", "log(", "`a)b`)", "`a)b`"),
        ("rs", "f(", "')')", "')'"),
    ],
)
def test_language_aliases_get_their_languages_bracket_lexer(
    alias: str, line_prefix: str, raw: str, expected: str
) -> None:
    site = _site(line_prefix, ")", language_id=alias)
    assert balance_brackets(raw, site) == expected
    assert clean_completion(raw, site) == expected


@pytest.mark.parametrize("language_id", ["python", "py", "js", "javascriptreact", "ts", "tsx",
                                         "typescriptreact", "golang", "rs", "java", "c", "c++"])
def test_context_and_postprocess_share_one_syntax_per_language(language_id: str) -> None:
    spec = spec_for(language_id)
    assert spec is not None
    assert spec.syntax is syntax_for(language_id)


# A client that does not know a language sends "plaintext" (or an id of its own): the file's
# extension names it then, for the grammar-less languages too (Ruby's `#` comments and quotes,
# not prose's). A known id wins over the extension.
@pytest.mark.parametrize(
    ("language_id", "uri", "expected"),
    [
        ("plaintext", "file:///p/app.rb", "ruby"),
        ("", "file:///p/Main.kt", "kotlin"),
        ("something-new", "file:///p/x.CS", "csharp"),
        ("plaintext", "file:///p/deploy.sh", "shellscript"),
        ("ruby", "file:///p/notes.txt", "ruby"),
        # Eglot sends every file of a server the id of the mode it started in.
        ("lua", "file:///p/app.rb", "ruby"),
        ("python", "file:///p/app.js", "javascript"),
        ("cpp", "file:///p/util.h", "cpp"),  # an id of the extension's kin wins
        ("typescript", "file:///p/app.js", "typescript"),
        ("bash", None, "shellscript"),
        ("Shell Script", None, "shellscript"),  # a display name: spaces ignored too
        ("C#", None, "csharp"),
        ("plaintext", "file:///p/notes.txt", "plaintext"),
        ("something-new", "file:///p/x.unknown", "something-new"),
    ],
)
def test_a_documents_language_falls_back_to_its_extension(
    language_id: str, uri: str | None, expected: str
) -> None:
    from lsp_complete.languages import language_name

    assert language_name(language_id, uri) == expected


@pytest.mark.parametrize(
    ("language_id", "uri", "enabled", "expected"),
    [
        ("javascriptreact", "file:///p/a.jsx", {"javascriptreact": False}, False),  # as sent
        ("javascriptreact", "file:///p/a.jsx", {"javascript": False}, False),  # as read
        ("javascriptreact", "file:///p/a.jsx", {"javascript": False, "javascriptreact": True},
         True),  # the id as sent first
        ("python", "file:///p/app.js", {"python": False}, True),  # Eglot's one id: not Python
        ("python", "file:///p/app.js", {"javascript": False}, False),
        ("python-ts", "file:///p/a.py", {"python": False}, False),  # Eglot's mode name
        ("plaintext", "file:///p/a.py", {"*": False, "python": True}, True),
        ("go", "file:///p/a.go", {"*": False}, False),
        ("go", "file:///p/a.go", {}, True),
    ],
)
def test_a_per_language_setting_applies_to_the_language_a_file_is_read_as(
    language_id: str, uri: str, enabled: dict[str, bool], expected: bool
) -> None:
    from lsp_complete.config import Settings
    from lsp_complete.languages import setting_keys

    assert Settings(enabled=enabled).language_enabled(setting_keys(language_id, uri)) == expected


def test_a_plaintext_ruby_file_gets_rubys_lexer_when_prepared() -> None:
    from lsp_complete.config import Settings
    from lsp_complete.documents import Document
    from lsp_complete.pipeline.prepare import prepare

    text = "def greet(name)\n  puts(\"hi #{name}\"\nend\n"
    doc = Document("file:///p/greet.rb", "plaintext", 1, text)
    site = prepare(doc, text.index("\"\n"), None, Settings()).site
    assert site.language_id == "ruby"
    assert syntax_for(site.language_id) is syntax_for("ruby")


@pytest.mark.parametrize(
    ("line_prefix", "text", "line_suffix", "language_id", "expected"),
    [
        ("foo(", "o2);", ")", "c", 1),  # the call's paren, then the statement's end
        ("assert_eq!(0, prev(t, 1", "));", "))", "rust", 2),
        ('split(flagList, " ', '") {', '")', "go", 2),
        ("const hello = \"", 'hello";', '"', "typescript", 1),
        ("g(", "f(x)", ")", "python", 0),  # closes its own paren: inserted before the editor's
        ("foo(", "o2", ")", "c", 0),  # no closer of its own: inserted
        ("foo(", "o2);\nbar();", ")", "c", 0),  # a block is not one line
        ("x = ", "1", "  # note", "python", 0),  # nothing but closers and quotes is replaced
        ("foo(", "a, b) + c", ") + c", "python", 0),  # code after the closers: dedupe's
        ("foo(", "o2);", ");", "c", 0),
        ("foo(o2", ")", ")", "c", 0),  # only what is there already
        ("f(", "x) ", ")  ", "python", 1),  # trailing blanks after the closers
        # Opens a body of its own: the editor's paren stays, for the `}` typed below it.
        ("useEffect(", "() => {", ")", "typescript", 0),
        ("run(", "func() {", ")", "go", 0),
    ],
)
def test_types_through_counts_the_closers_a_completion_writes_again(
    line_prefix: str, text: str, line_suffix: str, language_id: str, expected: int
) -> None:
    from lsp_complete.postprocess import types_through

    assert types_through(text, line_prefix, line_suffix, language_id) == expected


def test_the_replaced_closers_are_taken_from_the_document_only_where_the_client_asked() -> None:
    import dataclasses

    from lsp_complete.config import Settings
    from lsp_complete.documents import Document
    from lsp_complete.pipeline import prepare, replaced_after_cursor

    text = "int main() {\n    foo()\n}\n"
    doc = Document("file:///p/main.c", "c", 1, text)
    cursor = text.index("()\n") + 1
    off = Settings()
    on = dataclasses.replace(off, replace_line_suffix=True)
    assert replaced_after_cursor(doc, cursor, "o2);", off) == 0
    assert replaced_after_cursor(doc, cursor, "o2);", on) == 1
    assert replaced_after_cursor(doc, cursor, "o2", on) == 0
    assert prepare(doc, cursor, None, on).site.replace_line_suffix
    assert not prepare(doc, cursor, None, off).site.replace_line_suffix
