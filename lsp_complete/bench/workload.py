"""Typing-replay workloads: real source files, spans of lines removed and typed back.

Each episode starts from the original file with a span of lines replaced by one line holding
just the first line's indentation (the user opened a new line and the editor indented it), then
types the span back one character at a time. Enter is one key that inserts the line break and
the indentation the editor keeps (what the line and the next one share); any further
indentation is typed. After the last keystroke the document equals the original file
exactly.
"""

from __future__ import annotations

import glob
import os
import random
import re
import sysconfig
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lsp_complete.languages import code_languages, language_of_path
from lsp_complete.locations import cache_root

# The languages a run types in, one file each, in this order: the first three are what a
# default run replays (--num-files 3), the first eight those with a grammar; after them every
# other language languages.py knows, where the machine has a file of it (only the eight
# were typed before, and a gap elsewhere could not show).
_GRAMMAR_LANGUAGES = ("python", "javascript", "c", "go", "rust", "typescript", "java", "cpp")
_CODE = code_languages()
DEFAULT_LANGUAGES = _GRAMMAR_LANGUAGES + tuple(
    lang for lang in _CODE if lang not in _GRAMMAR_LANGUAGES and lang != "tsx")
# The file kinds the replay picks from the machine; languages.py names their languages. The
# eight's extensions as they were, so a seed picks the same files in them as before.
REPLAY_EXTENSIONS = (".py", ".js", ".mjs", ".cjs", ".ts", ".go", ".rs", ".c", ".h", ".cc", ".cpp",
                     ".java") + tuple(ext for lang in DEFAULT_LANGUAGES[8:] for ext in _CODE[lang])
LANGUAGE_BY_EXT = {ext: language_of_path("x" + ext) for ext in REPLAY_EXTENSIONS}

# Stdlib modules written by people, of varied style and size (the replay's Python sources).
PY_STDLIB_FILES = (
    "json/decoder.py",
    "textwrap.py",
    "argparse.py",
    "shlex.py",
    "heapq.py",
    "fnmatch.py",
    "csv.py",
    "calendar.py",
    "glob.py",
    "string.py",
    "configparser.py",
)
# Candidates for the ~2,000-line file of the open-latency measurement.
PY_LARGE_FILES = ("difflib.py", "subprocess.py", "argparse.py", "ast.py", "tarfile.py")

# Where other languages' sources sit on a typical machine (Debian's golang-*-src and rust-src
# packages, node's global modules, docs with examples, site-packages C extensions, rust
# toolchain docs, Go module cache); shell patterns allowed. Java's come out of a JDK's
# src.zip (`_jdk_sources`).
SEARCH_ROOTS = (
    "/usr/lib/node_modules",
    "/usr/local/lib/node_modules",
    "/usr/share",
    "~/.rustup/toolchains",
    "~/.cargo/registry/src",
    "~/go/pkg/mod",
    "/usr/local/go/src",
    "/usr/lib/go/src",
    "/usr/share/go-*/src",
    "/usr/lib/go-*/src",
    "/usr/src/rustc-*/library",
    "/usr/lib/ruby",
    "/var/lib/gems",
)
JDK_SOURCE_ZIPS = "/usr/lib/jvm/*/lib/src.zip"
JDK_PACKAGES = ("java.base/java/util/", "java.base/java/io/", "java.base/java/text/")
_MAX_SCAN_FILES = 200_000
_NOT_TYPED = (".min.", "_test.go", ".d.ts")
_CODE_MARKS = re.compile(r"[(){}\[\]=;:$<>]")


@dataclass(frozen=True)
class Keystroke:
    """One key and what the line-exact metric needs after it."""

    text: str  # what it inserts: one character, or Enter with the indentation the editor keeps
    line: int  # cursor line before the insertion (0-based)
    col: int  # cursor column before the insertion, in code points
    offset: int  # cursor offset (code points) after the insertion
    typed: int  # characters of the span in after it (`Episode.text_after`)
    typed_prefix: str  # the cursor line up to the cursor, after the insertion
    full_line: str  # the original text of the cursor line, after the insertion


@dataclass(frozen=True)
class Episode:
    """One span of one file: the starting text and the keystrokes that restore the original."""

    name: str
    path: str
    language_id: str
    initial_text: str
    start_offset: int  # where typing starts (the empty line left by the removed span)
    typed: str  # the characters typed, in order
    keystrokes: tuple[Keystroke, ...]

    def text_after(self, n_typed: int) -> str:
        """The document once the first `n_typed` characters of the span are in."""
        pos = self.start_offset
        return self.initial_text[:pos] + self.typed[:n_typed] + self.initial_text[pos:]

    @property
    def original_text(self) -> str:
        """The file as it was written, the span in place (what the keystrokes, uncapped,
        restore)."""
        return self.text_after(len(self.typed))


@dataclass(frozen=True)
class SourceFile:
    path: str
    language_id: str
    text: str


def read_source(path: str) -> SourceFile:
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    # Normalise line ends so offsets and the line-exact metric don't see "\r".
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return SourceFile(path=str(path), language_id=language_of_path(str(path)), text=text)


def _stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _looks_handwritten(text: str) -> bool:
    """Reject minified, bundled and generated files: they are not what people type."""
    lines = text.split("\n")
    if not 120 <= len(lines) <= 4000:
        return False
    if max(len(line) for line in lines) > 220:
        return False
    if sum(len(line) for line in lines) / len(lines) > 60:
        return False
    head = text[:3000].lower()
    if any(mark in head for mark in ("generated by", "do not edit", "autogenerated")):
        return False
    return _looks_like_code(lines)


def _looks_like_code(lines: list[str]) -> bool:
    """Not prose under a code extension (Emacs' Czech tutorial is TUTORIAL.cs): code has
    brackets, `=`, `;`, `:` or `$` on most lines, prose on few."""
    written = [line for line in lines if line.strip()]
    coded = sum(1 for line in written if _CODE_MARKS.search(line))
    return coded >= len(written) / 3


def _scan_roots(roots: tuple[str, ...], exts: set[str]) -> dict[str, list[str]]:
    """Files under the roots by language, folders walked in sorted order (os.walk's is not
    deterministic)."""
    found: dict[str, list[str]] = {}
    seen = 0
    bases = [base for root in roots for base in sorted(glob.glob(os.path.expanduser(root)))]
    for base in bases:
        for folder, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d not in ("test", "tests", "__tests__", ".git"))
            for name in files:
                seen += 1
                ext = os.path.splitext(name)[1].lower()
                # Not minified, Go tests (test folders are skipped above) or TypeScript
                # declarations (mostly generated).
                if ext in exts and not any(mark in name for mark in _NOT_TYPED):
                    found.setdefault(LANGUAGE_BY_EXT[ext], []).append(os.path.join(folder, name))
            if seen > _MAX_SCAN_FILES:
                return found
    return found


def _jdk_sources(pattern: str = JDK_SOURCE_ZIPS, limit: int = 400) -> list[str]:
    """Java sources of the first JDK whose src.zip is here (a JDK's own library, written by
    people), unpacked once into the cache folder: the files of JDK_PACKAGES, not deeper."""
    for archive in sorted(glob.glob(pattern)):
        try:
            real = Path(archive).resolve(strict=True)
            stat = real.stat()
            target = cache_root() / "bench-corpus" / f"jdk-{stat.st_size}-{stat.st_mtime_ns}"
            with zipfile.ZipFile(real) as zipped:
                names = [n for n in zipped.namelist() if n.endswith(".java")
                         and any(n.startswith(p) and "/" not in n[len(p):]
                                 for p in JDK_PACKAGES)][:limit]
                for name in names:
                    if not (target / name).is_file():
                        zipped.extract(name, target)
            return sorted(str(target / name) for name in names)
        except (OSError, zipfile.BadZipFile):
            continue
    return []


def _pick(paths: list[str], rng: random.Random, limit: int = 40) -> str | None:
    """Seeded choice among the candidates that look hand-written (reads at most `limit`)."""
    order = list(paths)
    rng.shuffle(order)
    for path in order[:limit]:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if _looks_handwritten(text):
            return path
    return None


def default_files(n_files: int, seed: int) -> list[str]:
    """One file per language, in DEFAULT_LANGUAGES order, chosen deterministically by `seed`."""
    rng = random.Random(f"bench-files:{seed}")
    stdlib = _stdlib_dir()
    candidates: dict[str, list[str]] = {
        "python": [str(stdlib / rel) for rel in PY_STDLIB_FILES if (stdlib / rel).exists()]
    }
    if n_files > 1:
        exts = {ext for ext, lang in LANGUAGE_BY_EXT.items() if lang != "python"}
        exts.discard(".h")  # headers are mostly declarations: little to type
        for lang, paths in _scan_roots(SEARCH_ROOTS, exts).items():
            candidates.setdefault(lang, []).extend(paths)
        site = Path(sysconfig.get_paths()["purelib"])
        candidates.setdefault("c", []).extend(str(p) for p in site.glob("*/**/*.c"))
        if n_files > DEFAULT_LANGUAGES.index("java"):  # unpacked only when asked for
            candidates.setdefault("java", []).extend(_jdk_sources())
    chosen: list[str] = []
    for lang in DEFAULT_LANGUAGES:
        if len(chosen) >= n_files:
            break
        pick = _pick(sorted(set(candidates.get(lang, []))), rng)
        if pick:
            chosen.append(pick)
    return chosen


_PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "go.mod", "Cargo.toml", "package.json")


def workspace_root(path: str) -> str:
    """The folder an editor would open for a file: for Python, the folder above its top
    package (the standard library's folder for a stdlib module: a marker further up, such as
    a pyenv checkout's .git, would ignore it all); otherwise the nearest folder with a project
    marker (.git, go.mod, Cargo.toml, package.json...), else the file's folder."""
    file = Path(path).resolve()
    if file.suffix in (".py", ".pyi"):
        folder = file.parent
        while (folder / "__init__.py").is_file() and folder.parent != folder:
            folder = folder.parent
        return str(folder)
    for folder in list(file.parents)[:6]:
        if any((folder / marker).exists() for marker in _PROJECT_MARKERS):
            return str(folder)
    return str(file.parent)


def quick_file() -> str:
    """A small stdlib module for `--quick`."""
    return str(_stdlib_dir() / "json" / "decoder.py")


def large_file(target_lines: int = 2000) -> str:
    """The stdlib module closest to `target_lines` lines (the open-latency file)."""
    stdlib = _stdlib_dir()
    sizes = []
    for rel in PY_LARGE_FILES:
        path = stdlib / rel
        if path.exists():
            n = path.read_text(encoding="utf-8").count("\n")
            sizes.append((abs(n - target_lines), rel, str(path)))
    if not sizes:
        raise FileNotFoundError("no stdlib module found for the open-latency measurement")
    return min(sizes)[2]


_COMMENT_MARKS = ("#", "//", "/*", "*", "--", "<!--")


def _line_ok(line: str) -> bool:
    # Code people type, not comments (license headers are memorised boilerplate) nor tabs
    # inside the code (aligned columns). Tabs that indent are typed code: Go's, and C's in
    # many projects; LSP counts a tab as one character.
    text = line.strip()
    return 8 <= len(text) <= 80 and "\t" not in text and not text.startswith(_COMMENT_MARKS)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def choose_spans(text: str, n_spans: int, n_lines: int, rng: random.Random) -> list[int]:
    """Start lines of non-overlapping spans of `n_lines` non-blank lines, seeded, drawn alike
    from every line that qualifies (after the first 20, so there is context before them).

    Not by length: spans chosen to fit a keystroke budget were the file's shortest lines
    (`return 0;`, `} else {`), which are not where people type. A budget types a span's first keys.
    """
    lines = text.split("\n")
    starts = [i for i in range(20, len(lines) - n_lines - 2)
              if all(_line_ok(line) for line in lines[i : i + n_lines])]
    rng.shuffle(starts)
    chosen: list[int] = []
    for start in starts:
        if all(abs(start - other) > n_lines + 2 for other in chosen):
            chosen.append(start)
        if len(chosen) == n_spans:
            break
    return sorted(chosen)


def make_episode(src: SourceFile, start: int, n_lines: int, cap: int | None = None) -> Episode:
    """Remove lines [start, start+n_lines), leaving the first one's indentation, and plan
    their retyping."""
    lines = src.text.split("\n")
    span = lines[start : start + n_lines]
    indent = _indent(span[0])
    typed = "\n".join(span)[len(indent) :]
    initial_lines = lines[:start] + [indent] + lines[start + n_lines :]
    initial_text = "\n".join(initial_lines)
    start_offset = sum(len(line) + 1 for line in lines[:start]) + len(indent)
    keys: list[Keystroke] = []
    line, col, offset, done = start, len(indent), start_offset, 0
    # A cap above the span's length types the whole span.
    while done < (len(typed) if cap is None else min(cap, len(typed))):
        text = typed[done]
        if text == "\n":  # Enter: the editor keeps what this line's and the next's indents share
            text += os.path.commonprefix([_indent(lines[line]), _indent(lines[line + 1])])
        before_line, before_col = line, col
        offset, done = offset + len(text), done + len(text)
        if text[0] == "\n":
            line, col = line + 1, len(text) - 1
        else:
            col += 1
        full = lines[line]
        keys.append(
            Keystroke(
                text=text,
                line=before_line,
                col=before_col,
                offset=offset,
                typed=done,
                typed_prefix=full[:col],
                full_line=full,
            )
        )
    name = f"{Path(src.path).name}:{start + 1}-{start + n_lines}"
    return Episode(
        name=name,
        path=src.path,
        language_id=src.language_id,
        initial_text=initial_text,
        start_offset=start_offset,
        typed=typed,
        keystrokes=tuple(keys),
    )


def build_episodes(
    files: list[str],
    n_spans: int,
    n_lines: int | Sequence[int],
    seed: int,
    max_keystrokes: int | None = None,
) -> list[Episode]:
    """`n_spans` spans of each size in `n_lines` (lines per span: one size, or several, e.g.
    one-line and 3-line spans side by side) for every file, the keystroke cap split between
    them by their lines; a cap of 0 (or no spans) means no replay, for runs of the other task
    sets alone."""
    sizes = [n_lines] if isinstance(n_lines, int) else list(n_lines)
    if max_keystrokes == 0 or n_spans == 0 or not sizes:
        return []
    total_lines = max(1, len(files) * n_spans) * sum(sizes)
    episodes: list[Episode] = []
    for path in files:
        src = read_source(path)
        rng = random.Random(f"bench-spans:{seed}:{Path(path).name}")
        for size in sizes:
            budget = max(1, max_keystrokes * size // total_lines) if max_keystrokes else None
            for start in choose_spans(src.text, n_spans, size, rng):
                episodes.append(make_episode(src, start, size, cap=budget))
    return episodes


# --- quality metric ---------------------------------------------------------------------------


def first_line(text: str) -> str:
    return text.split("\n", 1)[0]


def line_exact(typed_prefix: str, suggestion: str, full_line: str, after: str = "") -> bool:
    """The suggestion's first line completes the line exactly as it was actually typed (with
    `after`, what stays of the line after the cursor once it is taken)."""
    return (typed_prefix + first_line(suggestion) + after).rstrip() == full_line.rstrip()


def elsewhere_offset(ep: Episode) -> int:
    """A spot in the span's whole file (`original_text`) half the file away from the span,
    mid-way through a code line: where a user was before moving to the span."""
    lines = ep.original_text.split("\n")
    span_first = ep.initial_text.count("\n", 0, ep.start_offset)
    span_last = span_first + ep.typed.count("\n")
    near = range(span_first - 2, span_last + 3)
    start = (span_first + len(lines) // 2) % len(lines)
    order = [(start + i) % len(lines) for i in range(len(lines))]
    index = next((i for i in order if i not in near and _line_ok(lines[i])),
                 next((i for i in order if i not in near), start))
    line = lines[index]
    indent = len(line) - len(line.lstrip())
    return sum(len(x) + 1 for x in lines[:index]) + indent + (len(line) - indent) // 2


# --- open latency -----------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenCase:
    """A file opened with the cursor mid-way through a line in its middle (the large file,
    coldfiles.py's never-seen ones)."""

    path: str
    language_id: str
    text: str  # the file with its chosen line cut at `offset`
    offset: int
    line: str  # the chosen line as written

    @property
    def typed(self) -> str:
        """The cut line's text before the cursor."""
        return self.text[self.text.rfind("\n", 0, self.offset) + 1 : self.offset]

    @property
    def next_char(self) -> str:
        """The line's next character (a space at its end): typed for the next request."""
        return self.line[len(self.typed)] if len(self.typed) < len(self.line) else " "


def make_open_case(path: str) -> OpenCase:
    src = read_source(path)
    lines = src.text.split("\n")
    middle = len(lines) // 2
    index = next(
        (i for i in range(middle, len(lines)) if _line_ok(lines[i]) and len(lines[i].strip()) > 16),
        middle,
    )
    line = lines[index]
    indent = len(line) - len(line.lstrip())
    cut = min(len(line), indent + max(1, (len(line) - indent) // 2))  # a blank line: its end
    text = "\n".join(lines[:index] + [line[:cut]] + lines[index + 1 :])
    offset = sum(len(x) + 1 for x in lines[:index]) + cut
    return OpenCase(path=src.path, language_id=src.language_id, text=text, offset=offset,
                    line=line)
