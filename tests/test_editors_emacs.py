"""editors/emacs/lsp-complete.el in real Emacs (batch mode) with Eglot, against the real server.

CI installs emacs-nox and elpa-eglot; where Emacs or Eglot is missing these tests skip. The
ghost-text test connects to `lsp-complete serve` (the tiny model) and types into a copy of a
real Python file with `execute-kbd-macro`, so that the commands, their post-command-hook and
the keymaps run as they do for a user: the overlay's text must be the server's own answer for
that content and position; typing through it, moving away, asking again, accepting a word with
C-<right> and the rest with TAB must do what the README says. With lsp-complete-ghost-text
nil the suggestion is a completion-at-point candidate instead, also tested.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_next_edit_server import PROPAGATED, SOURCE, apply, sweep_answer
from tests.test_remote_engine import fake, remote_options  # noqa: F401  (the fixture)

REPO = Path(__file__).resolve().parent.parent
EL = REPO / "editors" / "emacs" / "lsp-complete.el"
ANCHOR = "    i = 0.74*(r-y)"


def _emacs_with_eglot() -> bool:
    if shutil.which("emacs") is None:
        return False
    done = subprocess.run(
        ["emacs", "--batch", "-q", "--eval", '(princ (if (require \'eglot nil t) "yes" "no"))'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.strip().endswith("yes")


pytestmark = pytest.mark.skipif(not _emacs_with_eglot(), reason="needs Emacs with Eglot")


def _script(body: str) -> str:
    """An Emacs program: Eglot, lsp-complete.el and the helpers below, then `body`."""
    return f"""
      (progn
        (require 'eglot)
        (require 'json)
        (load {json.dumps(str(EL))})
        {_PRINT}
        {body}
        (kill-emacs 0))
    """


def _serve(model: Path) -> str:
    """Elisp that points lsp-complete-command at this Python's server with `model`."""
    command = [sys.executable, "-m", "lsp_complete", "serve", "--model", str(model)]
    return f"(setq lsp-complete-command '({' '.join(json.dumps(c) for c in command)}))"


def _in_eglot(model: Path, source: Path, body: str, options: str = "") -> str:
    """An Emacs program that visits `source` in python-mode with Eglot on the real server
    (`model`; `options`: elisp run before the setup call) and the model ready, runs `body`,
    then shuts Eglot down."""
    return _script(f"""
        {_serve(model)}
        {options}
        (lsp-complete-eglot-setup)
        (find-file {json.dumps(str(source))})
        (python-mode)
        (test-connect)
        {body}
        (eglot-shutdown (eglot-current-server))""")


def _run_emacs(script: str, tmp_path: Path, timeout: int = 240) -> str:
    done = subprocess.run(
        ["emacs", "--batch", "-q", "--eval", script],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
        env=dict(
            os.environ,
            HOME=str(tmp_path),
            XDG_CACHE_HOME=str(tmp_path / "cache"),
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        ),
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    return out


def _values(out: str, key: str) -> list:
    """The JSON values printed as `KEY=<json>` lines, in order."""
    return [json.loads(m) for m in re.findall(rf"^{key}=(.*)$", out, re.M)]


_PRINT = """
(defun test-print (key value) (princ (format "%s=%s\\n" key (json-encode value))))
(defun test-wait (what predicate seconds)
  (let ((deadline (+ (float-time) seconds)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (unless (funcall predicate) (test-print "TIMEOUT" what))))
(defun test-line () (buffer-substring-no-properties (line-beginning-position) (line-end-position)))
(defun test-status ()
  (jsonrpc-request (eglot-current-server) :lsp-complete/status eglot--{}))
(defun test-connect ()
  "Eglot in this buffer with the lsp-complete entry; wait for the model."
  (apply #'eglot (eglot--guess-contact))
  (test-wait "ready" (lambda () (equal (plist-get (plist-get (test-status) :model) :state)
                                       "ready")) 60))
(defun test-server-answer (kind)
  "The server's own first item here: (insertText . range start character)."
  (let* ((result (jsonrpc-request (eglot-current-server) :textDocument/inlineCompletion
                                  (append (eglot--TextDocumentPositionParams)
                                          (list :context (list :triggerKind kind)))))
         (items (append (if (vectorp result) result (plist-get result :items)) nil))
         (item (car items)))
    (and item (list (lsp-complete--item-text item)
                    (plist-get (plist-get (plist-get item :range) :start) :character)))))
"""


def test_ghost_text_overlay_over_eglot(tmp_path: Path, tiny_model_path: Path) -> None:
    import colorsys

    source = tmp_path / "colors.py"
    shutil.copyfile(inspect.getsourcefile(colorsys), source)
    script = _in_eglot(tiny_model_path, source, f"""
        (test-print "MODE" (if lsp-complete-mode "on" "off"))
        (test-print "CAPABILITY" (plist-get (plist-get (eglot-client-capabilities
                                                        (eglot-current-server))
                                                       :textDocument)
                                            :inlineCompletion))
        (goto-char (point-min))
        (search-forward {json.dumps(ANCHOR)})
        (end-of-line)
        ;; Typing: RET opens an indented line, then `q = 0`.
        (execute-kbd-macro (kbd "RET q SPC = SPC 0"))
        (test-print "TYPED" (test-line))
        (test-wait "ghost" #'lsp-complete-current 30)
        (test-print "GHOST" (lsp-complete-current))
        (test-print "SERVER" (test-server-answer 2))
        ;; Typing the ghost text's first character keeps the rest on screen at once.
        (let ((first (aref (lsp-complete-current) 0)))
          (unless (eq first ?\\n)
            (execute-kbd-macro (vector first))
            (test-print "THROUGH" (list (test-line) (lsp-complete-current)))))
        ;; Any other command hides it: move left, then right again.
        (execute-kbd-macro (kbd "C-b"))
        (test-print "AFTER-MOVE" (lsp-complete-current))
        (execute-kbd-macro (kbd "C-f"))
        (test-print "STILL-HIDDEN" (lsp-complete-current))
        ;; Ask for one now (the command a key can be bound to).
        (call-interactively #'lsp-complete-request)
        (test-wait "ghost again" #'lsp-complete-current 30)
        (test-print "BEFORE-ACCEPT" (list (test-line) (lsp-complete-current)))
        (execute-kbd-macro (kbd "C-<right>"))
        (test-print "WORD" (list (test-line) (lsp-complete-current)))
        (let ((start (line-beginning-position)))
          (execute-kbd-macro (kbd "TAB"))
          (test-print "ACCEPTED" (buffer-substring-no-properties start (point))))
        (test-wait "accepted counter"
                   (lambda () (>= (plist-get (plist-get (test-status) :counters) :accepted) 1))
                   10)
        (test-print "COUNTERS" (plist-get (test-status) :counters))""")
    out = _run_emacs(script, tmp_path)
    assert not _values(out, "TIMEOUT"), out[-4000:]
    assert _values(out, "MODE") == ["on"], out[-3000:]
    assert _values(out, "CAPABILITY") == [{"dynamicRegistration": False}], out[-3000:]
    assert _values(out, "TYPED") == ["    q = 0"]

    # The overlay shows the server's answer for this content and position, less what the item's
    # range says is typed already.
    [ghost] = _values(out, "GHOST")
    [(insert, start)] = _values(out, "SERVER")
    typed = "    q = 0"[start if start is not None else len("    q = 0") :]
    assert insert.startswith(typed)
    assert ghost == insert[len(typed) :] and ghost

    through = _values(out, "THROUGH")
    if through:
        assert through == [["    q = 0" + ghost[0], ghost[1:] or None]]
    assert _values(out, "AFTER-MOVE") == [None]
    assert _values(out, "STILL-HIDDEN") == [None]

    [(line, shown)] = _values(out, "BEFORE-ACCEPT")
    [(line_after_word, rest)] = _values(out, "WORD")
    word = line_after_word[len(line) :]
    assert word and shown.startswith(word)
    assert rest == shown[len(word) :] or (rest is None and word == shown)
    [accepted] = _values(out, "ACCEPTED")
    assert accepted == line + shown  # TAB took the rest, across lines if there were several
    assert _values(out, "COUNTERS")[0]["accepted"] >= 1


def test_a_second_languages_file_is_read_in_its_own_language(tmp_path: Path,
                                                             tiny_model_path: Path) -> None:
    """This Eglot (1.9; joaotavora/eglot#1384 reports it in 2024) sends every file of a
    server the languageId of the mode the server started in: a JavaScript file visited after
    a Python one goes as "python". The server reads it as JavaScript (its extension rules
    Python out)."""
    source = tmp_path / "count.py"
    source.write_text("def count(xs):\n    return len(xs)\n")
    script_js = tmp_path / "app.js"
    script_js.write_text("const total = items.length;\n")
    script = _in_eglot(tiny_model_path, source, f"""
        (find-file {json.dumps(str(script_js))})
        (js-mode)
        (eglot--maybe-activate-editing-mode)
        (test-print "SENT" (plist-get (eglot--TextDocumentItem) :languageId))
        (test-print "READ" (vconcat (mapcar (lambda (doc)
                                              (format "%s=%s" (file-name-nondirectory
                                                               (plist-get doc :uri))
                                                      (plist-get doc :language)))
                                            (plist-get (test-status) :documents))))""")
    out = _run_emacs(script, tmp_path)
    sent, read = _values(out, "SENT")[0], sorted(_values(out, "READ")[0])
    print("sent:", sent, "read:", read)  # sent: "python" with Eglot 1.9
    assert read == ["app.js=javascript", "count.py=python"], out[-2000:]


def test_options_set_after_the_setup_call_apply(tmp_path: Path) -> None:
    """Options set with customize (or use-package :custom, setopt) after the setup call are
    applied through their :set hooks. (With lsp-complete-ghost-text nil the client declares no
    inline completion and gets the completion-at-point candidate: test_editors_config.py.)"""
    script = _script("""
        (setq lsp-complete-command '("true"))
        (lsp-complete-eglot-setup)
        (customize-set-variable 'lsp-complete-major-modes '(python-mode))
        (customize-set-variable 'lsp-complete-command '("/opt/lsp/bin/lsp-complete" "serve"))
        (test-print "ENTRY" (format "%S" (car eglot-server-programs)))
        (test-print "COUNT" (cl-count-if (lambda (e) (and (consp (cdr e))
                                                          (eq (cadr e) 'eglot-lsp-complete)))
                                         eglot-server-programs))""")
    out = _run_emacs(script, tmp_path, timeout=60)
    assert _values(out, "ENTRY") == [
        '((python-mode) eglot-lsp-complete "/opt/lsp/bin/lsp-complete" "serve")'
    ], out[-3000:]
    assert _values(out, "COUNT") == [1]


def test_missing_server_names_the_install_command(tmp_path: Path) -> None:
    from lsp_complete.doctor import INSTALL_HINT

    script = _script("""
        (setq lsp-complete-command '("no-such-lsp-complete" "serve"))
        (lsp-complete-eglot-setup)
        (condition-case err (lsp-complete-doctor)
          (user-error (princ (format "ERROR=%s\\n" (error-message-string err)))))""")
    out = _run_emacs(script, tmp_path, timeout=60)
    assert INSTALL_HINT in out.split("ERROR=", 1)[1], out
    assert "no-such-lsp-complete" in out


def test_package_byte_compiles_and_registers_once(tmp_path: Path) -> None:
    """Byte-compiled, the file loads and adds one entry to eglot-server-programs however often
    the setup runs."""
    el = tmp_path / "lsp-complete.el"
    shutil.copyfile(EL, el)
    script = f"""
      (progn
        (require 'eglot)
        (setq byte-compile-error-on-warn nil)
        (unless (byte-compile-file {json.dumps(str(el))}) (kill-emacs 3))
        (load {json.dumps(str(el) + "c")})
        (lsp-complete-eglot-setup)
        (lsp-complete-eglot-setup)
        (let ((entry (car eglot-server-programs)))
          (princ (format "MODES=%S\\nCONTACT=%S\\nCOUNT=%d\\n" (car entry) (cdr entry)
                         (cl-count-if (lambda (e) (and (consp (cdr e))
                                                       (eq (cadr e) 'eglot-lsp-complete)))
                                      eglot-server-programs)))))
    """
    out = _run_emacs(script, tmp_path, timeout=120)
    assert 'CONTACT=(eglot-lsp-complete "lsp-complete" "serve")' in out
    assert "COUNT=1" in out  # calling setup twice adds one entry
    assert "python-mode" in out and "rust-ts-mode" in out


def test_without_ghost_text_the_suggestion_is_a_completion_candidate(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """lsp-complete-ghost-text nil: the client declares no inline completion, so the server's
    suggestion is a completion-at-point candidate; lsp-complete-status shows the model."""
    source = tmp_path / "sample.py"
    source.write_text("import os\n\n\ndef main():\n    x = 1\n    print(x)\n")
    options = """(setq lsp-complete-initialization-options '(:maxTokens 16 :multiline "never"))
                 (setq lsp-complete-ghost-text nil)"""
    script = _in_eglot(tiny_model_path, source, """
        (test-print "MODE" (if lsp-complete-mode "on" "off"))
        (lsp-complete-status)
        (goto-char (point-min)) (forward-line 4) (end-of-line)
        (insert " + ab")
        (eglot--signal-textDocument/didChange)
        (let* ((capf (eglot-completion-at-point))
               (cands (all-completions "" (nth 2 capf))))
          (dolist (c cands)
            (let ((item (get-text-property 0 'eglot--lsp-item c)))
              (princ (format "ITEM detail=%s command=%s\\n"
                             (plist-get item :detail)
                             (plist-get (plist-get item :command) :command))))))""",
                       options)
    out = _run_emacs(script, tmp_path)
    assert not _values(out, "TIMEOUT"), out[-3000:]
    assert _values(out, "MODE") == ["off"], out[-3000:]
    assert re.search(r"^lsp-complete: .* \(ready\)", out, re.M), out[-3000:]
    assert "ITEM detail=lsp-complete (AI) command=lsp-complete.accepted" in out, out[-3000:]


def test_block_ready_asks_again_only_where_the_block_was_announced(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """lsp-complete/blockReady (issue 31): the handler asks again, with triggerKind
    Automatic, when point is still on the announced line at or after its position, in the
    announced buffer; not after a move to another line, nor before the position, nor for
    another file. Delivered through Eglot's own notification dispatch."""
    source = tmp_path / "sample.py"
    source.write_text("import os\n\n\ndef main():\n    x = 1\n    print(x)\n")
    script = _in_eglot(tiny_model_path, source, """
        (defvar test-asked nil)
        (advice-add 'lsp-complete-request :before
                    (lambda (&optional kind) (push (or kind 0) test-asked)))
        (defun test-announce (uri line character)
          (setq test-asked nil)
          (eglot-handle-notification (eglot-current-server) 'lsp-complete/blockReady
                                     :textDocument (list :uri uri)
                                     :position (list :line line :character character))
          (test-print "ASKED" (or test-asked [])))
        (let ((uri (funcall (if (fboundp 'eglot-path-to-uri) 'eglot-path-to-uri
                                 'eglot--path-to-uri)
                             (buffer-file-name))))
          (goto-char (point-min)) (forward-line 4) (forward-char 6)  ; "    x |= 1"
          (test-announce uri 4 3)   ; on the line, after the position: asked
          (test-announce uri 4 6)   ; at the position: asked
          (test-announce uri 4 8)   ; before the position: not
          (test-announce uri 3 3)   ; another line: not
          (test-announce "file:///elsewhere/other.py" 4 3))  ; another file: not""")
    out = _run_emacs(script, tmp_path)
    assert not _values(out, "TIMEOUT"), out[-3000:]
    assert _values(out, "ASKED") == [[2], [2], [], [], []], out[-3000:]


def test_next_edit_overlays_and_tab_applies_the_servers_edit(
    tmp_path: Path, tiny_model_path: Path, fake  # noqa: F811  (the fixture)
) -> None:
    """Next edits (issue 33): the user renames a parameter; the real server computes the next
    edit after the pause (its model answer scripted by the llama-server stand-in: carry the
    rename to the use) and sends lsp-complete/nextEditReady, which Eglot dispatches to our
    handler; it asks (textDocument/copilotInlineEdit), shows the replaced text with an
    overlay and tells the server (didShowInlineEdit); TAB applies exactly the server's edit
    and runs its command: the server counts it shown and accepted."""
    fake.pieces = sweep_answer(PROPAGATED)
    source = tmp_path / "area.py"
    source.write_text(SOURCE)
    options = remote_options(fake.url, tiny_model_path, remoteHealing="off", nextEditDelayMs=0)
    plist = " ".join(f":{k} {json.dumps(v)}" for k, v in options.items())
    script = _in_eglot(tiny_model_path, source, """
        (defun test-counter (name) (plist-get (plist-get (test-status) :counters) name))
        (goto-char (point-min)) (forward-char 9)           ; "def area(|width"
        (execute-kbd-macro (kbd "M-d w"))                   ; `width` -> `w`, typed
        (eglot--signal-textDocument/didChange)
        (test-wait "next edit" (lambda () lsp-complete--next-edit) 60)
        (let ((shown (or (lsp-complete-next-edit-current) (list "" 1 1))))  ; (none: TIMEOUT)
          (test-print "EDIT" lsp-complete--next-edit)
          (test-print "REPLACED" (buffer-substring-no-properties (nth 1 shown) (nth 2 shown)))
          (test-print "FACES" (mapcar (lambda (o) (format "%s" (overlay-get o 'face)))
                                      lsp-complete--next-edit-overlays)))
        (test-wait "shown counted" (lambda () (eql (test-counter :nextEditShown) 1)) 10)
        (execute-kbd-macro (kbd "TAB"))
        (test-print "TEXT" (buffer-substring-no-properties (point-min) (point-max)))
        (test-print "LEFT" (length lsp-complete--next-edit-overlays))
        (test-wait "accepted counted" (lambda () (eql (test-counter :nextEditAccepted) 1)) 10)
        (test-print "COUNTERS" (list (test-counter :nextEditShown)
                                     (test-counter :nextEditAccepted)))""",
        options=f"(setq lsp-complete-initialization-options '({plist}) lsp-complete-delay 3600"
                " lsp-complete-next-edit t)")
    out = _run_emacs(script, tmp_path)
    assert not _values(out, "TIMEOUT"), out[-3000:]
    (edit,) = _values(out, "EDIT")
    renamed = SOURCE.replace("area(width,", "area(w,")
    assert apply(renamed, edit) == PROPAGATED
    assert edit["command"]["command"] == "lsp-complete.accepted"
    assert _values(out, "REPLACED") == ["idth"]  # `return width` -> `return w`
    assert _values(out, "FACES") == [["lsp-complete-next-edit-delete-face"]]
    assert _values(out, "TEXT") == [PROPAGATED]
    assert _values(out, "LEFT") == [0]
    assert _values(out, "COUNTERS") == [[1, 1]]


def test_next_edit_off_is_told_to_the_server(tmp_path: Path, tiny_model_path: Path) -> None:
    """lsp-complete-next-edit nil (the default) sends :nextEdit "off" (the server computes
    none), t sends "on" (computed ahead), unless the initialization options set :nextEdit
    themselves."""
    source = tmp_path / "sample.py"
    source.write_text("x = 1\n")
    script = _in_eglot(tiny_model_path, source, """
        (defun test-options () (eglot-initialization-options (eglot-current-server)))
        (test-print "OFF" (test-options))
        (test-print "ASKED" (jsonrpc-request (eglot-current-server)
                                             :textDocument/copilotInlineEdit
                                             (list :textDocument
                                                   (eglot--VersionedTextDocumentIdentifier)
                                                   :position (eglot--pos-to-lsp-position))))
        (setq lsp-complete-initialization-options '(:nextEdit "on"))
        (test-print "KEPT" (test-options))
        (setq lsp-complete-next-edit t lsp-complete-initialization-options nil)
        (test-print "ON" (test-options))""")
    out = _run_emacs(script, tmp_path)
    assert _values(out, "OFF") == [{"nextEdit": "off", "replaceLineSuffix": True}], out[-3000:]
    assert _values(out, "ASKED") == [{"edits": []}]
    assert _values(out, "KEPT") == [{"nextEdit": "on", "replaceLineSuffix": True}]
    assert _values(out, "ON") == [{"nextEdit": "on", "replaceLineSuffix": True}]


def test_a_suggestion_over_the_closer_after_point_shows_the_line_and_tab_gives_it(
    tmp_path: Path, tiny_model_path: Path, fake  # noqa: F811  (the fixture)
) -> None:
    """The closer an auto-closing editor (electric-pair-mode) put after point: the server's
    item writes it again in its place (`x = foo(1|)` + `) + 2`, the range ends past the
    `)`; its model answer is scripted). The overlay over the `)` shows the line as it will
    read, and TAB gives that line, the `)` not doubled."""
    fake.pieces = [") + 2"]
    source = tmp_path / "calc.py"
    source.write_text("def foo(a):\n    return a\n\n\nx = foo()\n")
    options = remote_options(fake.url, tiny_model_path, remoteHealing="off", debounceMs=0)
    plist = " ".join(f":{k} {json.dumps(v)}" for k, v in options.items())
    script = _in_eglot(tiny_model_path, source, """
        (goto-char (point-min))
        (search-forward "x = foo(")
        (execute-kbd-macro (kbd "1"))
        (test-wait "ghost" #'lsp-complete-current 30)
        (test-print "GHOST" (list (lsp-complete-current)
                                  (buffer-substring-no-properties
                                   (overlay-start lsp-complete--overlay)
                                   (overlay-end lsp-complete--overlay))))
        (execute-kbd-macro (kbd "TAB"))
        (test-print "LINE" (list (test-line) (- (point) (line-beginning-position))))""",
        options=f"(setq lsp-complete-initialization-options '({plist}))")
    out = _run_emacs(script, tmp_path)
    assert not _values(out, "TIMEOUT"), out[-3000:]
    assert _values(out, "GHOST") == [[") + 2", ")"]]
    assert _values(out, "LINE") == [["x = foo(1) + 2", len("x = foo(1) + 2")]]


def test_an_item_is_a_suggestion_with_or_without_closers_to_replace(tmp_path: Path) -> None:
    """A block (no range past point) is shown as before; an item over the closers after point
    only when its text writes them again."""
    script = _script("""
        (with-temp-buffer
          (insert "x = foo()")
          (backward-char 1)
          (let ((over (list :start (list :line 0 :character 8)
                            :end (list :line 0 :character 9))))
            (test-print "BLOCK" (nth 1 (lsp-complete--suggestion-of
                                        (list :insertText (concat "a," "\n" "  b")))))
            (test-print "OVER" (nth 4 (lsp-complete--suggestion-of
                                       (list :insertText "1) + 2" :range over))))
            (test-print "NOT-HELD" (lsp-complete--suggestion-of
                                    (list :insertText "1" :range over)))))""")
    out = _run_emacs(script, tmp_path)
    assert _values(out, "BLOCK") == ["a,\n  b"], out[-2000:]
    assert _values(out, "OVER") == [")"]
    assert _values(out, "NOT-HELD") == [None]
