;;; lsp-complete.el --- Local AI code completion from lsp-complete, via Eglot  -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: languages, tools, completion
;; SPDX-License-Identifier: Apache-2.0

;;; Commentary:

;; Registers the `lsp-complete' language server (`lsp-complete serve') with Eglot for
;; Python, JavaScript/TypeScript, Go, Rust, Java, C and C++ buffers, and shows its
;; suggestions as ghost text: `lsp-complete-mode' asks the server for
;; `textDocument/inlineCompletion' through Eglot's connection while you type and draws the
;; answer in grey after point (an overlay).  TAB accepts it, C-<right> its next word, C-e
;; the rest of its line, C-g hides it, and so does any other command.  With
;; `lsp-complete-ghost-text' nil the suggestion is a `completion-at-point' candidate
;; instead ("lsp-complete (AI)").
;;
;; Eglot runs one server per buffer, so in these modes lsp-complete takes the place of your
;; usual language server; see README.md.
;;
;; Usage (set options before the setup call, or with customize / `setopt'):
;;   (add-to-list 'load-path "/path/to/lsp-complete/editors/emacs")
;;   (require 'lsp-complete)
;;   (lsp-complete-eglot-setup)
;;   ;; then M-x eglot in a source buffer (or add `eglot-ensure' to the mode hooks)

;;; Code:

(require 'cl-lib)
(require 'eglot)

(defgroup lsp-complete nil
  "Local AI code completion from the lsp-complete language server."
  :group 'tools
  :prefix "lsp-complete-")

(defconst lsp-complete-install-hint
  "install it from a checkout of lsp-complete: pipx install \".[default-model]\" (or pip install \".[default-model]\" in a virtual environment), then run lsp-complete doctor"
  "How to get the server (the same words in every README and message).")

(defvar lsp-complete--setup-done nil
  "Non-nil once `lsp-complete-eglot-setup' ran: changed options then redo it.")

(defun lsp-complete--set (symbol value)
  "Set SYMBOL to VALUE and, after `lsp-complete-eglot-setup', apply it there too."
  (set-default-toplevel-value symbol value)
  (when lsp-complete--setup-done
    (lsp-complete-eglot-setup)))

(defcustom lsp-complete-command '("lsp-complete" "serve")
  "Command line that starts the server.
Use a full path if `lsp-complete' is not on `exec-path', or
\(\"python3\" \"-m\" \"lsp_complete\" \"serve\")."
  :type '(repeat string)
  :set #'lsp-complete--set)

(defcustom lsp-complete-initialization-options nil
  "Plist sent to the server as initializationOptions.
Keys (all optional): :model (a models.toml name or a .gguf path), :threads,
:contextSize, :gpuLayers, :maxTokens, :multiline (\"auto\", \"always\" or
\"never\"), :enabled (a plist of languageId -> t or :json-false), :debounceMs.
Example: (:model \"qwen2.5-coder-0.5b\" :threads 4 :multiline \"never\").
Read when a server starts."
  :type 'plist
  :set #'lsp-complete--set)

(defcustom lsp-complete-major-modes
  '(python-mode python-ts-mode
    js-mode js-ts-mode js-jsx-mode typescript-mode typescript-ts-mode tsx-ts-mode
    go-mode go-ts-mode
    rust-mode rust-ts-mode
    java-mode java-ts-mode
    c-mode c-ts-mode c++-mode c++-ts-mode)
  "Major modes in which Eglot starts lsp-complete."
  :type '(repeat symbol)
  :set #'lsp-complete--set)

(defcustom lsp-complete-ghost-text t
  "Non-nil: show suggestions as ghost text (`lsp-complete-mode').
Nil: the suggestion is a `completion-at-point' candidate instead.
Read when a server starts (it tells the server which one the client
shows)."
  :type 'boolean
  :set #'lsp-complete--set)

(defcustom lsp-complete-delay 0.05
  "Seconds to wait after the last keystroke before asking for a suggestion."
  :type 'number)

(defface lsp-complete-ghost-face '((t :inherit shadow))
  "Face of the ghost text.")

(defcustom lsp-complete-next-edit nil
  "Non-nil: show the next edits the server predicts.
See `lsp-complete-next-edit-accept'.  Off by default: on the default model
they are rarely right yet.  The server is told to compute them ahead
\(initialization option `:nextEdit' \"on\") when non-nil, and not at all
\(\"off\") when nil, unless `lsp-complete-initialization-options' sets
`:nextEdit'."
  :type 'boolean)

(defface lsp-complete-next-edit-delete-face
  '((t :inherit diff-removed :strike-through t))
  "Face of the text a next edit replaces.")

(defface lsp-complete-next-edit-add-face '((t :inherit diff-added))
  "Face of the text a next edit inserts.")

(defclass eglot-lsp-complete (eglot-lsp-server) ()
  :documentation "The lsp-complete language server.")

(cl-defmethod eglot-initialization-options ((_server eglot-lsp-complete))
  "Send `lsp-complete-initialization-options' (an empty object when nil).
With ghost text, the server is also told that the overlay shows a suggestion
that replaces the closers after point (`:replaceLineSuffix')."
  (let ((options lsp-complete-initialization-options))
    (unless (plist-member options :nextEdit)
      (setq options (append options (list :nextEdit (if lsp-complete-next-edit "on" "off")))))
    (when (and lsp-complete-ghost-text (not (plist-member options :replaceLineSuffix)))
      (setq options (append options (list :replaceLineSuffix t))))
    (or options eglot--{})))

(cl-defmethod eglot-client-capabilities :around ((_server eglot-lsp-complete))
  "Declare inline completion when `lsp-complete-ghost-text' is on.
The server then leaves its suggestion out of `textDocument/completion'."
  (let ((capabilities (cl-call-next-method)))
    (when lsp-complete-ghost-text
      (plist-put (plist-get capabilities :textDocument)
                 :inlineCompletion '(:dynamicRegistration :json-false)))
    capabilities))

(defun lsp-complete-eglot-contact ()
  "The `eglot-server-programs' entry for lsp-complete: (MODES . CONTACT)."
  (cons lsp-complete-major-modes
        (cons 'eglot-lsp-complete lsp-complete-command)))

;;;###autoload
(defun lsp-complete-eglot-setup ()
  "Make Eglot use lsp-complete in `lsp-complete-major-modes'.
The entry goes first in `eglot-server-programs', ahead of the usual
servers.  With `lsp-complete-ghost-text', the server's Eglot buffers
get `lsp-complete-mode'."
  (interactive)
  (setq eglot-server-programs
        (cons (lsp-complete-eglot-contact)
              (cl-remove-if (lambda (entry)
                              (and (consp (cdr entry))
                                   (eq (cadr entry) 'eglot-lsp-complete)))
                            eglot-server-programs)))
  (add-hook 'eglot-managed-mode-hook #'lsp-complete--maybe-enable)
  (unless (executable-find (car lsp-complete-command))
    (display-warning 'lsp-complete
                     (format "`%s' not found; %s; or set `lsp-complete-command'"
                             (car lsp-complete-command) lsp-complete-install-hint)))
  (setq lsp-complete--setup-done t))

(defun lsp-complete--server ()
  "The running lsp-complete server of this buffer, or nil."
  (let ((server (eglot-current-server)))
    (and server (cl-typep server 'eglot-lsp-complete) server)))

;;;###autoload
(defun lsp-complete-status ()
  "Show the model, its state and the last latency (`lsp-complete/status')."
  (interactive)
  (let ((server (lsp-complete--server)))
    (unless server
      (user-error "No lsp-complete server in this buffer (M-x eglot first)"))
    (let* ((status (jsonrpc-request server :lsp-complete/status eglot--{}))
           (model (plist-get status :model))
           (recent (plist-get status :recent))
           (last (and (> (length recent) 0) (aref recent (1- (length recent))))))
      (message "lsp-complete: %s (%s)%s%s"
               (or (plist-get model :name) "?")
               (or (plist-get model :state) "?")
               (if (plist-get model :device) (format " on %s" (plist-get model :device)) "")
               (if (and last (plist-get last :latencyMs))
                   (format ", last suggestion %d ms" (round (plist-get last :latencyMs)))
                 "")))))

;;; Ghost text

(defvar lsp-complete-completion-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "TAB") #'lsp-complete-accept)
    (define-key map (kbd "<tab>") #'lsp-complete-accept)
    (define-key map (kbd "C-<right>") #'lsp-complete-accept-word)
    (define-key map (kbd "C-e") #'lsp-complete-accept-line)
    (define-key map (kbd "C-g") #'lsp-complete-dismiss)
    map)
  "Keys that act on the ghost text while it is shown (and only then).")

(defvar-local lsp-complete--active nil
  "Non-nil while ghost text is shown: `lsp-complete-completion-map' is on.")

(defvar lsp-complete--emulation-alist
  `((lsp-complete--active . ,lsp-complete-completion-map)))
(add-to-list 'emulation-mode-map-alists 'lsp-complete--emulation-alist)

(defvar lsp-complete-mode)
(defvar-local lsp-complete--overlay nil)
(defvar-local lsp-complete--suggestion nil
  "The suggestion: (START TEXT AFTER COMMAND REPLACE).
TEXT replaces the buffer from the marker START to point, and the string REPLACE
after point (the closers an auto-closing editor put there, which TEXT writes
again; usually empty); AFTER is the rest of the line after point when it was
asked for; COMMAND the server's command.")
(defvar-local lsp-complete--timer nil)
(defvar-local lsp-complete--seq 0 "Number of the newest request; older answers are dropped.")
(defvar-local lsp-complete--tick nil "`buffer-chars-modified-tick' after the last command.")

(defconst lsp-complete--own-commands
  '(lsp-complete-accept lsp-complete-accept-word lsp-complete-accept-line lsp-complete-request)
  "Commands after which the ghost text stays as it is.")

(defun lsp-complete--clear ()
  "Remove the ghost text from the screen (the suggestion is kept)."
  (when lsp-complete--overlay
    (delete-overlay lsp-complete--overlay)
    (setq lsp-complete--overlay nil))
  (setq lsp-complete--active nil))

(defun lsp-complete-dismiss ()
  "Hide the suggestion and forget it."
  (interactive)
  (lsp-complete--clear)
  (setq lsp-complete--suggestion nil))

(defun lsp-complete--remainder ()
  "The part of the suggestion still to show at point.
Nil when it no longer fits what is typed."
  (pcase lsp-complete--suggestion
    (`(,start ,text ,after ,_command ,_replace)
     (when (and (markerp start) (eq (marker-buffer start) (current-buffer))
                (<= start (point)))
       (let ((typed (buffer-substring-no-properties start (point))))
         (when (and (< (length typed) (length text))
                    (string-prefix-p typed text)
                    (equal after (buffer-substring-no-properties
                                  (point) (line-end-position))))
           (substring text (length typed))))))))

(defun lsp-complete--render ()
  "Draw the rest of the suggestion after point.
A suggestion that no longer fits is forgotten."
  (lsp-complete--clear)
  (let ((rest (lsp-complete--remainder)))
    (if (not rest)
        (setq lsp-complete--suggestion nil)
      (let* ((replace (nth 4 lsp-complete--suggestion))
             (ghost (propertize rest 'face 'lsp-complete-ghost-face))
             ;; Over closers, text typed at point stays out of the overlay (front-advance).
             (overlay (make-overlay (point) (+ (point) (length replace)) nil
                                    (not (string-empty-p replace)) t)))
        ;; The cursor stays before the ghost text, not after it.
        (put-text-property 0 1 'cursor t ghost)
        ;; Over the closers it replaces, the suggestion shows the line as it will read.
        (overlay-put overlay (if (string-empty-p replace) 'after-string 'display) ghost)
        (overlay-put overlay 'lsp-complete t)
        (setq lsp-complete--overlay overlay
              lsp-complete--active t)))))

(defun lsp-complete-current ()
  "The ghost text shown now, or nil."
  (and lsp-complete--overlay
       (substring-no-properties (or (overlay-get lsp-complete--overlay 'after-string)
                                    (overlay-get lsp-complete--overlay 'display)))))

(defun lsp-complete--item-text (item)
  "The insertText of ITEM (a string or a StringValue), or nil."
  (let ((text (plist-get item :insertText)))
    (cond ((stringp text) text)
          ((and (consp text) (stringp (plist-get text :value))) (plist-get text :value)))))

(defun lsp-complete--position-point (position)
  "The point of the LSP POSITION."
  (if (fboundp 'eglot--lsp-position-to-point)
      (eglot--lsp-position-to-point position)
    (save-excursion
      (goto-char (point-min))
      (forward-line (plist-get position :line))
      (min (+ (point) (plist-get position :character)) (line-end-position)))))

(defun lsp-complete--holds-in-order (text chars)
  "Non-nil when the one-line TEXT holds the characters of CHARS in order."
  (and (not (string-search "\n" text))
       (let ((at 0))
         (cl-every (lambda (ch)
                     (let ((found (string-search (string ch) text at)))
                       (and found (setq at (1+ found)))))
                   chars))))

(defun lsp-complete--suggestion-of (item)
  "ITEM as a suggestion at point: (START TEXT AFTER COMMAND REPLACE), or nil.
A range that ends past point on its line replaces what lies there: the
closers TEXT writes again in their place."
  (let* ((text (lsp-complete--item-text item))
         (range (plist-get item :range))
         (start (if range
                    (lsp-complete--position-point (plist-get range :start))
                  (point)))
         (end (if range
                  (lsp-complete--position-point (plist-get range :end))
                (point)))
         (replace (if (and (> end (point)) (<= end (line-end-position)))
                      (buffer-substring-no-properties (point) end)
                    ""))
         (typed (and (<= (line-beginning-position) start (point))
                     (buffer-substring-no-properties start (point)))))
    (when (and text (not (string-empty-p text)) typed
               (string-prefix-p typed text)
               (or (string-empty-p replace)
                   (lsp-complete--holds-in-order (substring text (length typed)) replace)))
      (list (copy-marker start) text
            (buffer-substring-no-properties (point) (line-end-position))
            (plist-get item :command) replace))))

(defun lsp-complete--show (result)
  "Show the first usable item of RESULT (a list or an array of items)."
  (let ((items (if (vectorp result) result (plist-get result :items))))
    (setq lsp-complete--suggestion
          (cl-some #'lsp-complete--suggestion-of (append items nil)))
    (lsp-complete--render)))

(defun lsp-complete-request (&optional kind)
  "Ask the server for a suggestion at point now.
KIND is the LSP trigger kind: 1 asked for (the default when called
interactively), 2 automatic."
  (interactive (list 1))
  (let ((server (lsp-complete--server)))
    (when server
      (when (fboundp 'eglot--signal-textDocument/didChange)
        (eglot--signal-textDocument/didChange))
      (let ((buffer (current-buffer))
            (tick (buffer-chars-modified-tick))
            (at (point))
            (seq (cl-incf lsp-complete--seq)))
        (jsonrpc-async-request
         server :textDocument/inlineCompletion
         (append (eglot--TextDocumentPositionParams)
                 (list :context (list :triggerKind (or kind 2))))
         :success-fn
         (lambda (result)
           (when (buffer-live-p buffer)
             (with-current-buffer buffer
               ;; Only the newest answer, and only while nothing changed since it was asked.
               (when (and lsp-complete-mode (= seq lsp-complete--seq)
                          (= tick (buffer-chars-modified-tick)) (= at (point)))
                 (lsp-complete--show result)))))
         :error-fn #'ignore
         :timeout-fn #'ignore)))))

;; Server notifications arrive in the connection's process buffer (jsonrpc's filter), not in
;; the buffer being edited: find that one from the URI.
(defun lsp-complete--selected-buffer (uri)
  "The buffer visiting URI when it is the selected window's, else nil."
  (let* ((path (and (stringp uri)
                    (if (fboundp 'eglot-uri-to-path)
                        (eglot-uri-to-path uri)
                      (eglot--uri-to-path uri))))
         (buffer (and path (find-buffer-visiting path))))
    (and buffer (eq buffer (window-buffer (selected-window))) buffer)))

;; Server -> client: a block beginning with the suggestion shown at `position' is ready.
(cl-defmethod eglot-handle-notification
  ((_server eglot-lsp-complete) (_method (eql lsp-complete/blockReady))
   &key textDocument position &allow-other-keys)
  "Ask again where the block was announced, if point is still on that line at or
after POSITION in the buffer of TEXTDOCUMENT.  The server answers from its
typing-ahead, with no model call."
  (let ((buffer (lsp-complete--selected-buffer (plist-get textDocument :uri))))
    (when buffer
      (with-current-buffer buffer
        (when (and lsp-complete-mode
                   (= (1- (line-number-at-pos)) (plist-get position :line))
                   (>= (point) (lsp-complete--position-point position)))
          (lsp-complete-request 2))))))

(defun lsp-complete--schedule ()
  "Ask for a suggestion once typing pauses for `lsp-complete-delay' seconds."
  (when (timerp lsp-complete--timer)
    (cancel-timer lsp-complete--timer))
  (let ((buffer (current-buffer)))
    (setq lsp-complete--timer
          (run-at-time lsp-complete-delay nil
                       (lambda ()
                         (when (and (buffer-live-p buffer) (eq buffer (current-buffer)))
                           (with-current-buffer buffer
                             (setq lsp-complete--timer nil)
                             (lsp-complete-request 2))))))))

(defun lsp-complete--post-command ()
  "After a command: keep a suggestion typed through, ask anew after an edit.
Any other command hides it."
  ;; this-command is nil when a command loop starts (a keyboard macro, a recursive edit):
  ;; no command ran.
  (unless (or (null this-command) (memq this-command lsp-complete--own-commands))
    (let ((tick (buffer-chars-modified-tick)))
      (if (equal tick lsp-complete--tick)
          (lsp-complete-dismiss)
        (setq lsp-complete--tick tick)
        (lsp-complete--render)
        (lsp-complete--schedule)))))

(defun lsp-complete--next-word (rest)
  "The part of REST that one `lsp-complete-accept-word' takes."
  (let ((case-fold-search nil))
    (cond ((string-match "\\`\n[ \t]*" rest) (match-string 0 rest))
          ((string-match "\\`[ \t]*\\(?:[[:alnum:]_]+\\|[^[:alnum:]_[:space:]]+\\)" rest)
           (match-string 0 rest))
          ((string-match "\\`[ \t]+" rest) (match-string 0 rest))
          (t (substring rest 0 1)))))

(defun lsp-complete--next-line (rest)
  "The part of REST that one `lsp-complete-accept-line' takes."
  (string-match "\\`\n?[^\n]*" rest)
  (match-string 0 rest))

(defun lsp-complete--run-command (command)
  "Send the accepted item's COMMAND to the server (it counts the acceptance)."
  (let ((server (lsp-complete--server)))
    (when (and server command (plist-get command :command))
      (jsonrpc-async-request server :workspace/executeCommand
                             (list :command (plist-get command :command)
                                   :arguments (or (plist-get command :arguments) []))
                             :success-fn #'ignore :error-fn #'ignore :timeout-fn #'ignore))))

(defun lsp-complete-accept (&optional how)
  "Insert the suggestion: all of it, or with HOW `word' or `line' a part of it."
  (interactive)
  (let ((rest (lsp-complete--remainder)))
    (when rest
      (let* ((replace (nth 4 lsp-complete--suggestion))
             (part (pcase how
                     ((guard (not (string-empty-p replace))) rest)  ; around the closers: all
                     ('word (lsp-complete--next-word rest))
                     ('line (lsp-complete--next-line rest))
                     (_ rest)))
             (command (nth 3 lsp-complete--suggestion)))
        (when (string-empty-p part)
          (setq part rest))
        (lsp-complete--clear)
        (delete-region (point) (+ (point) (length replace)))
        (insert part)
        (setq lsp-complete--tick (buffer-chars-modified-tick))
        (if (< (length part) (length rest))
            (lsp-complete--render)
          (setq lsp-complete--suggestion nil)
          (lsp-complete--run-command command)
          (lsp-complete--schedule))))))

(defun lsp-complete-accept-word ()
  "Insert the next word of the suggestion."
  (interactive)
  (lsp-complete-accept 'word))

(defun lsp-complete-accept-line ()
  "Insert the rest of the suggestion's current line."
  (interactive)
  (lsp-complete-accept 'line))

;;; Next edits (textDocument/copilotInlineEdit, Copilot's protocol)

(require 'diff-mode)  ; the faces the next-edit faces inherit

(defvar lsp-complete-next-edit-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "TAB") #'lsp-complete-next-edit-accept)
    (define-key map (kbd "<tab>") #'lsp-complete-next-edit-accept)
    (define-key map (kbd "C-g") #'lsp-complete-next-edit-dismiss)
    map)
  "Keys that act on the next edit while it is shown (and only then).")

(defvar-local lsp-complete--next-edit nil
  "The next edit shown: the server's plist (:text :range :textDocument :command).")
(defvar-local lsp-complete--next-edit-overlays nil)
(defvar-local lsp-complete--next-edit-seq 0 "Number of the newest next-edit request.")

;; After the ghost text's keys, so that TAB accepts ghost text first when both are shown.
(add-to-list 'lsp-complete--emulation-alist
             `(lsp-complete--next-edit . ,lsp-complete-next-edit-map) t)

(defun lsp-complete--version ()
  "The version of this buffer's text that the server has (Eglot's)."
  eglot--versioned-identifier)

(defun lsp-complete-next-edit-dismiss ()
  "Hide the next edit and forget it."
  (interactive)
  (mapc #'delete-overlay lsp-complete--next-edit-overlays)
  (setq lsp-complete--next-edit-overlays nil
        lsp-complete--next-edit nil))

(defun lsp-complete--next-edit-region (edit)
  "The region (BEG . END) EDIT replaces."
  (let ((range (plist-get edit :range)))
    (cons (lsp-complete--position-point (plist-get range :start))
          (lsp-complete--position-point (plist-get range :end)))))

(defun lsp-complete--next-edit-show (edit)
  "Show EDIT: the text it replaces struck through, the new text after it."
  (lsp-complete-next-edit-dismiss)
  (let* ((region (lsp-complete--next-edit-region edit))
         (text (plist-get edit :text)))
    (when (< (car region) (cdr region))
      (let ((overlay (make-overlay (car region) (cdr region))))
        (overlay-put overlay 'face 'lsp-complete-next-edit-delete-face)
        (overlay-put overlay 'lsp-complete-next-edit t)
        (push overlay lsp-complete--next-edit-overlays)))
    (when (and (stringp text) (not (string-empty-p text)))
      ;; An empty overlay carrying only the new text (not `evaporate', which would delete it).
      (let ((overlay (make-overlay (cdr region) (cdr region))))
        (overlay-put overlay 'after-string
                     (propertize text 'face 'lsp-complete-next-edit-add-face))
        (overlay-put overlay 'lsp-complete-next-edit t)
        (push overlay lsp-complete--next-edit-overlays)))
    (setq lsp-complete--next-edit edit)
    (let ((server (lsp-complete--server)))
      (when server
        (jsonrpc-notify server :textDocument/didShowInlineEdit (list :item edit))))))

(defun lsp-complete-next-edit-current ()
  "The next edit shown: (TEXT BEG END), or nil."
  (when lsp-complete--next-edit
    (let ((region (lsp-complete--next-edit-region lsp-complete--next-edit)))
      (list (plist-get lsp-complete--next-edit :text) (car region) (cdr region)))))

(defun lsp-complete-next-edit-request ()
  "Ask the server for the next edit at point now."
  (interactive)
  (let ((server (lsp-complete--server)))
    (when (and server lsp-complete-next-edit)
      (when (fboundp 'eglot--signal-textDocument/didChange)
        (eglot--signal-textDocument/didChange))
      (let ((buffer (current-buffer))
            (version (lsp-complete--version))
            (seq (cl-incf lsp-complete--next-edit-seq)))
        (jsonrpc-async-request
         server :textDocument/copilotInlineEdit
         (list :textDocument (eglot--VersionedTextDocumentIdentifier)
               :position (eglot--pos-to-lsp-position)
               :context (list :triggerKind 2))
         :success-fn
         (lambda (result)
           (when (buffer-live-p buffer)
             (with-current-buffer buffer
               (let ((edit (car (append (plist-get result :edits) nil))))
                 ;; The newest answer, for the text as it still is.
                 (when (and edit (= seq lsp-complete--next-edit-seq)
                            (equal version (lsp-complete--version))
                            (equal (plist-get (plist-get edit :textDocument) :version)
                                   version))
                   (lsp-complete--next-edit-show edit))))))
         :error-fn #'ignore
         :timeout-fn #'ignore)))))

(defun lsp-complete-next-edit-accept ()
  "Apply the next edit shown, exactly as the server sent it, and run its command.
Nothing happens when the buffer changed since it was computed."
  (interactive)
  (let ((edit lsp-complete--next-edit))
    (lsp-complete-next-edit-dismiss)
    (when (and edit (equal (plist-get (plist-get edit :textDocument) :version)
                           (lsp-complete--version)))
      (let ((region (lsp-complete--next-edit-region edit)))
        (goto-char (car region))
        (delete-region (car region) (cdr region))
        (insert (plist-get edit :text))
        (lsp-complete--run-command (plist-get edit :command))))))

(defvar-local lsp-complete--next-edit-tick nil)

(defun lsp-complete--next-edit-post-command ()
  "Drop the next edit shown once the text changes (its range would be wrong)."
  (let ((tick (buffer-chars-modified-tick)))
    (unless (equal tick lsp-complete--next-edit-tick)
      (setq lsp-complete--next-edit-tick tick)
      (when lsp-complete--next-edit
        (lsp-complete-next-edit-dismiss)))))

;; Server -> client: a next edit is ready for this version of a document.
(cl-defmethod eglot-handle-notification
  ((_server eglot-lsp-complete) (_method (eql lsp-complete/nextEditReady))
   &key textDocument &allow-other-keys)
  "Ask for the next edit when it is for the selected buffer at its current version."
  (let ((buffer (lsp-complete--selected-buffer (plist-get textDocument :uri))))
    (when buffer
      (with-current-buffer buffer
        (when (and lsp-complete-mode lsp-complete-next-edit
                   (equal (plist-get textDocument :version) (lsp-complete--version)))
          (lsp-complete-next-edit-request))))))

;;;###autoload
(define-minor-mode lsp-complete-mode
  "Ghost text from the lsp-complete server of this Eglot buffer.
While you type, the suggestion shows in grey after point; \\<lsp-complete-completion-map>\\[lsp-complete-accept] accepts it,
\\[lsp-complete-accept-word] its next word, \\[lsp-complete-accept-line] the rest of its line; other
commands hide it.  \\[lsp-complete-request] asks for one at once."
  :lighter " ghost"
  (if lsp-complete-mode
      (progn
        (setq lsp-complete--tick (buffer-chars-modified-tick)
              lsp-complete--next-edit-tick (buffer-chars-modified-tick))
        (add-hook 'post-command-hook #'lsp-complete--post-command nil t)
        (add-hook 'post-command-hook #'lsp-complete--next-edit-post-command nil t))
    (remove-hook 'post-command-hook #'lsp-complete--post-command t)
    (remove-hook 'post-command-hook #'lsp-complete--next-edit-post-command t)
    (lsp-complete-next-edit-dismiss)
    (when (timerp lsp-complete--timer)
      (cancel-timer lsp-complete--timer))
    (lsp-complete-dismiss)))

(defun lsp-complete--maybe-enable ()
  "Turn `lsp-complete-mode' on or off with Eglot in lsp-complete's buffers."
  (when (and lsp-complete-ghost-text (lsp-complete--server))
    (lsp-complete-mode (if (eglot-managed-p) 1 -1))))

;;;###autoload
(defun lsp-complete-doctor ()
  "Run `lsp-complete doctor' and show its report.
It checks Python, the llama.cpp backend, the model and the cache folder."
  (interactive)
  (let* ((serve (or (cl-position "serve" lsp-complete-command :test #'equal)
                    (length lsp-complete-command)))
         (argv (append (cl-subseq lsp-complete-command 0 serve) '("doctor"))))
    (unless (executable-find (car argv))
      (user-error "lsp-complete: `%s' not found; %s; or set `lsp-complete-command'"
                  (car argv) lsp-complete-install-hint))
    (with-current-buffer (get-buffer-create "*lsp-complete doctor*")
      (let ((inhibit-read-only t))
        (erase-buffer)
        (apply #'call-process (car argv) nil t nil (cdr argv)))
      (special-mode)
      (display-buffer (current-buffer)))))

(provide 'lsp-complete)
;;; lsp-complete.el ends here
