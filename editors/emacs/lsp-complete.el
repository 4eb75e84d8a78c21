;;; lsp-complete.el --- Local AI code completion from lsp-complete, via Eglot  -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: languages, tools, completion
;; SPDX-License-Identifier: Apache-2.0

;;; Commentary:

;; Registers the `lsp-complete' language server (`lsp-complete serve') with Eglot for
;; Python, JavaScript/TypeScript, Go, Rust, Java, C and C++ buffers.
;;
;; Eglot has no inline ("ghost text") completion: the server's suggestion arrives as one
;; candidate of `completion-at-point' (shown by company / corfu / the *Completions* buffer),
;; with the annotation "lsp-complete (AI)".  Eglot runs one server per buffer, so in these
;; modes lsp-complete takes the place of your usual language server; see README.md.
;;
;; Usage:
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

(defcustom lsp-complete-command '("lsp-complete" "serve")
  "Command line that starts the server.
Use a full path if `lsp-complete' is not on `exec-path', or
\(\"python3\" \"-m\" \"lsp_complete\" \"serve\")."
  :type '(repeat string))

(defcustom lsp-complete-initialization-options nil
  "Plist sent to the server as initializationOptions.
Keys (all optional): :model (a models.toml name or a .gguf path), :threads,
:contextSize, :gpuLayers, :maxTokens, :multiline (\"auto\", \"always\" or
\"never\"), :enabled (a plist of languageId -> t or :json-false), :debounceMs.
Example: (:model \"qwen2.5-coder-0.5b\" :threads 4 :multiline \"never\")."
  :type 'plist)

(defcustom lsp-complete-major-modes
  '(python-mode python-ts-mode
    js-mode js-ts-mode js-jsx-mode typescript-mode typescript-ts-mode tsx-ts-mode
    go-mode go-ts-mode
    rust-mode rust-ts-mode
    java-mode java-ts-mode
    c-mode c-ts-mode c++-mode c++-ts-mode)
  "Major modes in which Eglot starts lsp-complete."
  :type '(repeat symbol))

(defclass eglot-lsp-complete (eglot-lsp-server) ()
  :documentation "The lsp-complete language server.")

(cl-defmethod eglot-initialization-options ((_server eglot-lsp-complete))
  "Send `lsp-complete-initialization-options' (an empty object when nil)."
  (or lsp-complete-initialization-options eglot--{}))

(defun lsp-complete-eglot-contact ()
  "The `eglot-server-programs' entry for lsp-complete: (MODES . CONTACT)."
  (cons lsp-complete-major-modes
        (cons 'eglot-lsp-complete lsp-complete-command)))

;;;###autoload
(defun lsp-complete-eglot-setup ()
  "Make Eglot use lsp-complete in `lsp-complete-major-modes'.
The entry goes first in `eglot-server-programs', ahead of the usual servers."
  (interactive)
  (setq eglot-server-programs
        (cons (lsp-complete-eglot-contact)
              (cl-remove-if (lambda (entry)
                              (and (consp (cdr entry))
                                   (eq (cadr entry) 'eglot-lsp-complete)))
                            eglot-server-programs))))

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

(provide 'lsp-complete)
;;; lsp-complete.el ends here
