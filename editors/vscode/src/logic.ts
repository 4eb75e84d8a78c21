/**
 * Pure logic of the extension: no `vscode` import, so that it can be unit-tested with
 * `node --test` without a VS Code instance. extension.ts turns these plain values into
 * VS Code objects.
 */

/** The id of the extension's own command that forwards an accepted item's command. */
export const ACCEPT_COMMAND_ID = "lspComplete.accepted";
/** Client -> server notification: the cursor rests here, prepare the prompt for this spot. */
export const CURSOR_METHOD = "lsp-complete/didMoveCursor";
/** How long the cursor must rest before the server hears of it. */
export const CURSOR_DEBOUNCE_MS = 150;

/**
 * The VS Code language ids the server knows (lsp_complete/languages.py, less plain text and
 * Markdown): opening a file of one of them activates the extension (package.json
 * activationEvents), so no model loads in a window without source files.
 */
export const SERVED_LANGUAGES = [
  "c",
  "cpp",
  "csharp",
  "cuda-cpp",
  "elixir",
  "go",
  "haskell",
  "java",
  "javascript",
  "javascriptreact",
  "julia",
  "kotlin",
  "lua",
  "objective-cpp",
  "perl",
  "php",
  "python",
  "r",
  "ruby",
  "rust",
  "scala",
  "shellscript",
  "sql",
  "swift",
  "toml",
  "typescript",
  "typescriptreact",
  "yaml",
] as const;

/** How to get the server (the same words in every README and message). */
export const INSTALL_HINT =
  "install it from a checkout of lsp-complete: pipx install \".[default-model]\" " +
  "(or pip install \".[default-model]\" in a virtual environment), then run lsp-complete doctor";

// ---------------------------------------------------------------------------------------------
// Settings -> server command and initializationOptions
// ---------------------------------------------------------------------------------------------

export type Multiline = "auto" | "always" | "never";

/** The `lspComplete.*` settings, as read from the workspace configuration. */
export interface Settings {
  serverPath?: string;
  serverArgs?: string[];
  model?: string | null;
  threads?: number | null;
  contextSize?: number | null;
  gpuLayers?: number | null;
  maxTokens?: number | null;
  multiline?: string | null;
  enabled?: Record<string, unknown> | null;
  debounceMs?: number | null;
  /** Next-edit suggestions on/off (the server's `nextEdit`: "on"/"off"). */
  nextEdit?: boolean | null;
  /** The model next edits alone use (a models.toml name or .gguf path); empty: the completion model. */
  nextEditModel?: string | null;
}

/** initializationOptions the server understands (all optional, camelCase). */
export interface InitializationOptions {
  model?: string;
  threads?: number;
  contextSize?: number;
  gpuLayers?: number;
  maxTokens?: number;
  multiline?: Multiline;
  enabled?: Record<string, boolean>;
  debounceMs?: number;
  nextEdit?: "on" | "off";
  nextEditModel?: string;
}

/**
 * What VS Code itself renders, sent beside the user's settings: an inline item whose range
 * ends past the cursor (the closers an auto-closing editor put there, which the suggestion
 * writes again in their place) is shown as ghost text around them and replaces them on Tab.
 */
export const CLIENT_OPTIONS = { replaceLineSuffix: true } as const;

/** The setting keys that become initializationOptions (same name on both sides). */
export const INIT_OPTION_KEYS = [
  "model",
  "threads",
  "contextSize",
  "gpuLayers",
  "maxTokens",
  "multiline",
  "enabled",
  "debounceMs",
  "nextEdit",
  "nextEditModel",
] as const;

function intOrUndefined(value: unknown, min: number): number | undefined {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    return undefined;
  }
  const n = Math.trunc(value);
  return n >= min ? n : undefined;
}

/**
 * Settings -> initializationOptions. Unset, empty or invalid values are left out, so that the
 * server's own defaults (and the LSP_COMPLETE_MODEL environment variable) apply.
 */
export function toInitializationOptions(settings: Settings): InitializationOptions {
  const out: InitializationOptions = {};
  if (typeof settings.model === "string" && settings.model.trim() !== "") {
    out.model = settings.model.trim();
  }
  const threads = intOrUndefined(settings.threads, 1);
  if (threads !== undefined) out.threads = threads;
  const contextSize = intOrUndefined(settings.contextSize, 1);
  if (contextSize !== undefined) out.contextSize = contextSize;
  // gpuLayers: -1 means "all layers" to llama.cpp, so negative values are kept.
  const gpuLayers = intOrUndefined(settings.gpuLayers, -1);
  if (gpuLayers !== undefined) out.gpuLayers = gpuLayers;
  const maxTokens = intOrUndefined(settings.maxTokens, 1);
  if (maxTokens !== undefined) out.maxTokens = maxTokens;
  if (
    settings.multiline === "auto" ||
    settings.multiline === "always" ||
    settings.multiline === "never"
  ) {
    out.multiline = settings.multiline;
  }
  if (settings.enabled && typeof settings.enabled === "object") {
    const enabled: Record<string, boolean> = {};
    for (const [lang, on] of Object.entries(settings.enabled)) {
      if (typeof on === "boolean" && lang !== "") enabled[lang] = on;
    }
    if (Object.keys(enabled).length > 0) out.enabled = enabled;
  }
  const debounceMs = intOrUndefined(settings.debounceMs, 0);
  if (debounceMs !== undefined) out.debounceMs = debounceMs;
  if (typeof settings.nextEdit === "boolean") out.nextEdit = settings.nextEdit ? "on" : "off";
  if (typeof settings.nextEditModel === "string" && settings.nextEditModel.trim() !== "") {
    out.nextEditModel = settings.nextEditModel.trim();
  }
  return out;
}

/**
 * What to do when settings change: "restart" when the command changed or an option was
 * removed (the server keeps an option it is not sent again), "update" to send the new options
 * with workspace/didChangeConfiguration, "none" when nothing the server sees changed.
 */
export function configChangeAction(
  previous: InitializationOptions,
  next: InitializationOptions,
  commandChanged: boolean,
): "restart" | "update" | "none" {
  if (commandChanged) return "restart";
  const prevKeys = Object.keys(previous) as (keyof InitializationOptions)[];
  const nextKeys = Object.keys(next) as (keyof InitializationOptions)[];
  if (prevKeys.some((k) => !(k in next))) return "restart";
  const changed = nextKeys.some((k) => JSON.stringify(previous[k]) !== JSON.stringify(next[k]));
  return changed ? "update" : "none";
}

/** The server's command line: `lsp-complete serve` unless the settings say otherwise. */
export function serverCommand(settings: Settings): { command: string; args: string[] } {
  const command =
    typeof settings.serverPath === "string" && settings.serverPath.trim() !== ""
      ? settings.serverPath.trim()
      : "lsp-complete";
  const args =
    Array.isArray(settings.serverArgs) && settings.serverArgs.length > 0
      ? settings.serverArgs.map(String)
      : ["serve"];
  return { command, args };
}

/** Whether suggestions are wanted for a language: on unless `enabled[languageId] === false`. */
export function isLanguageEnabled(
  enabled: Record<string, unknown> | null | undefined,
  languageId: string,
): boolean {
  if (!enabled || typeof enabled !== "object") return true;
  const value = enabled[languageId] ?? enabled["*"];
  return value !== false;
}

/**
 * The `lspComplete.enabled` object with one language switched. The value is always written
 * out (also `true`), so that switching a language back on updates the running server
 * (workspace/didChangeConfiguration) instead of restarting it for a removed option.
 */
export function setLanguageEnabled(
  enabled: Record<string, unknown> | null | undefined,
  languageId: string,
  on: boolean,
): Record<string, boolean> {
  const out: Record<string, boolean> = {};
  for (const [lang, value] of Object.entries(enabled ?? {})) {
    if (typeof value === "boolean") out[lang] = value;
  }
  out[languageId] = on;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Snooze
// ---------------------------------------------------------------------------------------------

/** The snooze lengths the status menu offers, in minutes. */
export const SNOOZE_MINUTES = [5, 15, 60] as const;

/** Milliseconds of snooze left at `now`; 0 when not snoozed. */
export function snoozeLeftMs(until: number | undefined, now: number): number {
  return typeof until === "number" && until > now ? until - now : 0;
}

export function formatDuration(ms: number): string {
  const minutes = Math.ceil(ms / 60000);
  return minutes >= 60 && minutes % 60 === 0 ? `${minutes / 60} h` : `${minutes} min`;
}

// ---------------------------------------------------------------------------------------------
// LSP inline completion items -> plain items for vscode.InlineCompletionItem
// ---------------------------------------------------------------------------------------------

export interface LspPosition {
  line: number;
  character: number;
}
export interface LspRange {
  start: LspPosition;
  end: LspPosition;
}
export interface LspCommand {
  title: string;
  command: string;
  arguments?: unknown[];
}
/** LSP 3.18 StringValue (a snippet). */
export interface LspStringValue {
  kind: "snippet";
  value: string;
}
export interface LspInlineCompletionItem {
  insertText: string | LspStringValue;
  filterText?: string;
  range?: LspRange;
  command?: LspCommand;
}
export interface LspInlineCompletionList {
  items: LspInlineCompletionItem[];
}
export type LspInlineCompletionResult =
  | LspInlineCompletionList
  | LspInlineCompletionItem[]
  | null
  | undefined;

/** An item ready to become a vscode.InlineCompletionItem. */
export interface ConvertedItem {
  insertText: string;
  /** true: `insertText` is snippet syntax (vscode.SnippetString). */
  snippet: boolean;
  filterText?: string;
  range?: LspRange;
  /** The VS Code command run after accept: ours, carrying the server's command. */
  command?: { title: string; command: string; arguments: unknown[] };
}

function isPosition(p: unknown): p is LspPosition {
  const q = p as LspPosition;
  return (
    !!q &&
    typeof q.line === "number" &&
    typeof q.character === "number" &&
    q.line >= 0 &&
    q.character >= 0
  );
}

function isRange(r: unknown): r is LspRange {
  const q = r as LspRange;
  return !!q && isPosition(q.start) && isPosition(q.end);
}

/**
 * The accept hook: VS Code runs `command` after the user accepts an item. We point it at our
 * own command, which sends the server's command as `workspace/executeCommand`.
 */
export function toAcceptCommand(
  cmd: LspCommand | undefined,
): { title: string; command: string; arguments: unknown[] } | undefined {
  if (!cmd || typeof cmd.command !== "string" || cmd.command === "") return undefined;
  return {
    title: typeof cmd.title === "string" ? cmd.title : "accept",
    command: ACCEPT_COMMAND_ID,
    arguments: [{ command: cmd.command, arguments: Array.isArray(cmd.arguments) ? cmd.arguments : [] }],
  };
}

/** The LSP `workspace/executeCommand` params for our accept command's argument. */
export function executeCommandParams(arg: unknown): { command: string; arguments: unknown[] } | undefined {
  const a = arg as { command?: unknown; arguments?: unknown };
  if (!a || typeof a.command !== "string" || a.command === "") return undefined;
  return { command: a.command, arguments: Array.isArray(a.arguments) ? a.arguments : [] };
}

/** One LSP item -> plain item; undefined for items that show nothing. */
export function convertItem(item: LspInlineCompletionItem): ConvertedItem | undefined {
  if (!item) return undefined;
  let insertText: string;
  let snippet = false;
  if (typeof item.insertText === "string") {
    insertText = item.insertText;
  } else if (item.insertText && typeof item.insertText.value === "string") {
    insertText = item.insertText.value;
    snippet = item.insertText.kind === "snippet";
  } else {
    return undefined;
  }
  if (insertText === "") return undefined;
  const out: ConvertedItem = { insertText, snippet };
  if (typeof item.filterText === "string") out.filterText = item.filterText;
  if (isRange(item.range)) out.range = item.range;
  const command = toAcceptCommand(item.command);
  if (command) out.command = command;
  return out;
}

/** The server's answer (list, array or null) -> plain items. */
export function convertResult(result: LspInlineCompletionResult): ConvertedItem[] {
  if (!result) return [];
  const items = Array.isArray(result) ? result : Array.isArray(result.items) ? result.items : [];
  const out: ConvertedItem[] = [];
  for (const item of items) {
    const converted = convertItem(item);
    if (converted) out.push(converted);
  }
  return out;
}

/**
 * VS Code's InlineCompletionTriggerKind (Invoke = 0, Automatic = 1) -> LSP's
 * InlineCompletionTriggerKind (Invoked = 1, Automatic = 2).
 */
export function toLspTriggerKind(vscodeKind: number): 1 | 2 {
  return vscodeKind === 0 ? 1 : 2;
}

// ---------------------------------------------------------------------------------------------
// lsp-complete/status -> status bar text
// ---------------------------------------------------------------------------------------------

export type ModelState = "loading" | "ready" | "error";

export interface ServerStatus {
  model?: { name?: string; path?: string; state?: ModelState | string; device?: string | null };
  counters?: Record<string, unknown>;
  latency?: { p50?: number | null; p95?: number | null; count?: number };
  recent?: Array<{ latencyMs?: number } & Record<string, unknown>>;
}

/** What besides the server's state the status bar item shows. */
export interface StatusContext {
  /** When the snooze ends (ms since the epoch); undefined: not snoozed. */
  snoozedUntil?: number;
  now?: number;
  /** The active editor's language id, and whether suggestions are on for it. */
  languageId?: string;
  languageEnabled?: boolean;
}

export interface StatusView {
  /** Text for the status bar item (may contain $(icon) codes). */
  text: string;
  /** Tooltip. */
  tooltip: string;
  /** "error" / "warning" decide the status bar item's background; undefined = normal. */
  severity?: "error" | "warning";
}

/** The last latency in `recent` (the newest entry is the last one). */
export function lastLatencyMs(status: ServerStatus | undefined): number | undefined {
  const recent = status?.recent;
  if (!Array.isArray(recent)) return undefined;
  for (let i = recent.length - 1; i >= 0; i--) {
    const ms = recent[i]?.latencyMs;
    if (typeof ms === "number" && Number.isFinite(ms)) return ms;
  }
  return undefined;
}

export function formatLatency(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(1)} s`;
}

/** Model, device and latencies for the status bar item's tooltip. */
export function statusTooltipLines(status: ServerStatus): string[] {
  const m = status.model ?? {};
  const lines = [`Model: ${m.name || "?"}${m.device ? ` on ${m.device}` : ""}`];
  const latency = lastLatencyMs(status);
  if (latency !== undefined) {
    let line = `Last suggestion: ${formatLatency(latency)}`;
    const p = status.latency;
    if (p && typeof p.p50 === "number" && typeof p.p95 === "number" && (p.count ?? 0) > 0) {
      line += ` (p50 ${formatLatency(p.p50)}, p95 ${formatLatency(p.p95)} over ${p.count})`;
    }
    lines.push(line);
  }
  return lines;
}

/**
 * The status bar text. `status` is the last answer (undefined before the first one);
 * `connection` says whether the client is starting, running, failed/stopped, or has no
 * server to start ("missing"); `context` adds the snooze and the active editor's language.
 */
export function formatStatus(
  status: ServerStatus | undefined,
  enabled: boolean,
  connection: "starting" | "running" | "stopped" | "missing" = "running",
  context: StatusContext = {},
): StatusView {
  const name = status?.model?.name || "model";
  const menu = "Click for snooze, per-language switch and status.";
  if (connection === "missing") {
    return {
      text: "$(warning) lsp-complete: set up",
      tooltip: "lsp-complete: the server is not installed. Click to set it up.",
      severity: "warning",
    };
  }
  if (connection === "stopped") {
    return {
      text: "$(error) lsp-complete",
      tooltip: "lsp-complete: the server is not running. Click for details.",
      severity: "error",
    };
  }
  if (!enabled) {
    return {
      text: "$(circle-slash) lsp-complete: off",
      tooltip: `lsp-complete: inline completions are off. ${menu}`,
    };
  }
  const snoozed = snoozeLeftMs(context.snoozedUntil, context.now ?? Date.now());
  if (snoozed > 0) {
    return {
      text: `$(clock) lsp-complete: snoozed ${formatDuration(snoozed)}`,
      tooltip: `lsp-complete: snoozed for ${formatDuration(snoozed)} more. ${menu}`,
    };
  }
  if (context.languageId && context.languageEnabled === false) {
    return {
      text: `$(circle-slash) lsp-complete: off for ${context.languageId}`,
      tooltip: `lsp-complete: inline completions are off for ${context.languageId}. ${menu}`,
    };
  }
  if (connection === "starting" || !status) {
    return {
      text: "$(sync~spin) lsp-complete",
      tooltip: "lsp-complete: starting the server…",
    };
  }
  const state = status.model?.state;
  if (state === "loading") {
    return {
      text: "$(sync~spin) lsp-complete: loading",
      tooltip: `lsp-complete: loading ${name}…`,
    };
  }
  if (state === "error") {
    return {
      text: "$(error) lsp-complete: error",
      tooltip: `lsp-complete: ${name} failed to load. Click for details.`,
      severity: "error",
    };
  }
  const latency = lastLatencyMs(status);
  const device = status.model?.device ? ` on ${status.model.device}` : "";
  const tooltipLines = [`lsp-complete: ${name}${device} is ready.`, ...statusTooltipLines(status), menu];
  return {
    text: latency !== undefined ? `$(sparkle) lsp-complete ${formatLatency(latency)}` : "$(sparkle) lsp-complete",
    tooltip: tooltipLines.join("\n"),
  };
}

// ---------------------------------------------------------------------------------------------
// The status bar item's menu
// ---------------------------------------------------------------------------------------------

export type MenuAction =
  | { kind: "snooze"; minutes: number }
  | { kind: "resume" }
  | { kind: "language"; languageId: string; on: boolean }
  | { kind: "toggle" }
  | { kind: "showStatus" }
  | { kind: "restart" }
  | { kind: "setup" };

export interface MenuItem {
  label: string;
  description?: string;
  action: MenuAction;
}

/** The quick pick the status bar item opens, for the current state. */
export function menuItems(state: {
  enabled: boolean;
  snoozedUntil?: number;
  now?: number;
  languageId?: string;
  languageEnabled?: boolean;
  missing?: boolean;
}): MenuItem[] {
  const items: MenuItem[] = [];
  if (state.missing) {
    items.push({ label: "$(tools) Set up the server…", action: { kind: "setup" } });
  }
  const left = snoozeLeftMs(state.snoozedUntil, state.now ?? Date.now());
  if (left > 0) {
    items.push({
      label: "$(play) Resume now",
      description: `snoozed for ${formatDuration(left)} more`,
      action: { kind: "resume" },
    });
  } else if (state.enabled) {
    for (const minutes of SNOOZE_MINUTES) {
      items.push({
        label: `$(clock) Snooze for ${minutes === 60 ? "1 hour" : `${minutes} minutes`}`,
        action: { kind: "snooze", minutes },
      });
    }
  }
  if (state.languageId) {
    const on = state.languageEnabled !== false;
    items.push({
      label: `${on ? "$(circle-slash) Turn off" : "$(check) Turn on"} for ${state.languageId}`,
      description: "lspComplete.enabled",
      action: { kind: "language", languageId: state.languageId, on: !on },
    });
  }
  items.push({
    label: state.enabled ? "$(circle-slash) Turn off everywhere" : "$(check) Turn on everywhere",
    action: { kind: "toggle" },
  });
  items.push({ label: "$(pulse) Show server status", action: { kind: "showStatus" } });
  items.push({ label: "$(debug-restart) Restart server", action: { kind: "restart" } });
  return items;
}

/** The long, human-readable report shown by `lspComplete.showStatus`. */
export function formatStatusDetails(status: ServerStatus | undefined, enabled: boolean): string {
  const lines: string[] = [];
  lines.push(`Inline completions: ${enabled ? "on" : "off"}`);
  if (!status) {
    lines.push("Server: no answer to lsp-complete/status yet");
    return lines.join("\n");
  }
  const m = status.model ?? {};
  lines.push(`Model: ${m.name ?? "?"}`);
  if (m.path) lines.push(`Path: ${m.path}`);
  lines.push(`State: ${m.state ?? "?"}`);
  if (m.device) lines.push(`Device: ${m.device}`);
  const counters = status.counters ?? {};
  const keys = Object.keys(counters).sort();
  if (keys.length > 0) {
    lines.push("Counters:");
    for (const k of keys) lines.push(`  ${k}: ${JSON.stringify(counters[k])}`);
  }
  const latencies = (status.recent ?? [])
    .map((r) => r?.latencyMs)
    .filter((v): v is number => typeof v === "number" && Number.isFinite(v));
  if (latencies.length > 0) {
    const sorted = [...latencies].sort((a, b) => a - b);
    const median = sorted[Math.floor((sorted.length - 1) / 2)];
    lines.push(
      `Recent latency: last ${formatLatency(latencies[latencies.length - 1])}, ` +
        `median ${formatLatency(median)} over ${latencies.length} requests`,
    );
  }
  return lines.join("\n");
}

export interface CursorMoveParams {
  textDocument: { uri: string };
  position: LspPosition;
}

/** The didMoveCursor params for a caret (a selection's anchor and active end coincide);
 * undefined for a real selection, where nobody is about to type. */
/** Server -> client: a block beginning with the suggestion shown at `position` is ready. */
export const BLOCK_READY_METHOD = "lsp-complete/blockReady";

export interface BlockReadyParams {
  textDocument: { uri: string; version: number };
  position: LspPosition;
}

/**
 * Whether to ask again for the block the server announced: the same document, the cursor
 * still on the announced line at or after its spot (typing on through the first line is
 * answered with the block from the server's typing-ahead, so asking costs no model call).
 */
export function blockStillWanted(params: BlockReadyParams, uri: string, cursor: LspPosition): boolean {
  return (
    params.textDocument.uri === uri &&
    cursor.line === params.position.line &&
    cursor.character >= params.position.character
  );
}

export function cursorMoveParams(uri: string, anchor: LspPosition, active: LspPosition): CursorMoveParams | undefined {
  if (anchor.line !== active.line || anchor.character !== active.character) return undefined;
  return { textDocument: { uri }, position: { line: active.line, character: active.character } };
}

// ---------------------------------------------------------------------------------------------
// `lsp-complete doctor`
// ---------------------------------------------------------------------------------------------

/**
 * The doctor's command line for the server's: the server arguments up to "serve" replaced
 * by `doctor --json`, with the model the extension asks for. Undefined when the arguments
 * have no "serve" (a custom command the doctor cannot be derived from).
 */
export function doctorCommand(settings: Settings): { command: string; args: string[] } | undefined {
  const { command, args } = serverCommand(settings);
  const serve = args.indexOf("serve");
  if (serve < 0) return undefined;
  const out = [...args.slice(0, serve), "doctor", "--json"];
  const model = toInitializationOptions(settings).model;
  if (model) out.push("--model", model);
  return { command, args: out };
}

export interface DoctorCheck {
  name: string;
  status: "ok" | "warn" | "fail" | "skip" | string;
  summary: string;
  fix?: string | null;
}

export interface DoctorReport {
  version?: string;
  ok?: boolean;
  checks?: DoctorCheck[];
}

/** The doctor's --json report as lines for the output channel; undefined when it is not one. */
export function formatDoctorReport(stdout: string): string | undefined {
  let report: DoctorReport;
  try {
    report = JSON.parse(stdout) as DoctorReport;
  } catch {
    return undefined;
  }
  if (!report || !Array.isArray(report.checks)) return undefined;
  const width = Math.max(...report.checks.map((c) => String(c.name).length));
  const lines = [`lsp-complete doctor (server ${report.version ?? "?"}):`];
  for (const c of report.checks) {
    const label = c.status === "fail" ? "FAIL" : c.status;
    lines.push(`  ${`[${label}]`.padEnd(7)}${String(c.name).padEnd(width)}  ${c.summary}`);
    if (c.fix) lines.push(`  ${" ".repeat(7 + width)}  fix: ${c.fix}`);
  }
  lines.push(report.ok ? "  Everything the server needs is here." : "  Some checks failed: see the fixes above.");
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------
// Guided setup: a private Python environment with the server
// ---------------------------------------------------------------------------------------------

/**
 * Where an executable is: a path (with a separator) as it is, a bare name looked up in
 * `pathEnv` (with Windows' PATHEXT extensions). `isFile` says whether a path is an executable
 * file (injected, so that this stays testable).
 */
export function findExecutable(
  command: string,
  pathEnv: string | undefined,
  platform: string,
  isFile: (path: string) => boolean,
  pathExt = ".EXE;.CMD;.BAT;.COM",
): string | undefined {
  const win = platform === "win32";
  const sep = win ? ";" : ":";
  const join = (dir: string, name: string) => (dir.endsWith("/") || dir.endsWith("\\") ? dir + name : `${dir}${win ? "\\" : "/"}${name}`);
  const exts = win ? ["", ...pathExt.split(";").filter((e) => e !== "").map((e) => e.toLowerCase())] : [""];
  const tryPath = (p: string) => exts.map((e) => p + e).find((candidate) => isFile(candidate));
  if (command.includes("/") || (win && command.includes("\\"))) return tryPath(command);
  for (const dir of (pathEnv ?? "").split(sep)) {
    if (dir === "") continue;
    const found = tryPath(join(dir, command));
    if (found) return found;
  }
  return undefined;
}

/** The Python interpreters to try for the private environment, best first. */
export function pythonCandidates(platform: string): { command: string; args: string[] }[] {
  if (platform === "win32") {
    return [
      { command: "py", args: ["-3"] },
      { command: "python", args: [] },
    ];
  }
  return ["python3.13", "python3.12", "python3.11", "python3", "python"].map((command) => ({ command, args: [] }));
}

/** The argument that prints a Python's version as "MAJOR MINOR". */
export const PYTHON_VERSION_ARGS = ["-c", "import sys; print(*sys.version_info[:2])"];
export const MIN_PYTHON: [number, number] = [3, 11];

export function parsePythonVersion(stdout: string): [number, number] | undefined {
  const m = /^(\d+) (\d+)\s*$/.exec(stdout.trim());
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}

export function isRecentPython(version: [number, number] | undefined): boolean {
  return !!version && (version[0] > MIN_PYTHON[0] || (version[0] === MIN_PYTHON[0] && version[1] >= MIN_PYTHON[1]));
}

/** The private environment's interpreter and server command. */
export function venvLayout(dir: string, platform: string): { python: string; server: string } {
  if (platform === "win32") {
    return { python: `${dir}\\Scripts\\python.exe`, server: `${dir}\\Scripts\\lsp-complete.exe` };
  }
  return { python: `${dir}/bin/python`, server: `${dir}/bin/lsp-complete` };
}

/** pip's arguments to install the server with its default model from a checkout or a wheel. */
export function pipInstallArgs(source: string): string[] {
  return ["-m", "pip", "install", "--disable-pip-version-check", `${source}[default-model]`];
}

/** Whether a file the user picked can be installed: a checkout folder or a .whl file. */
export function installSourceKind(path: string, isDirectory: boolean): "checkout" | "wheel" | undefined {
  if (isDirectory) return "checkout";
  return /\.whl$/i.test(path) ? "wheel" : undefined;
}

/** A short progress message for a line of pip's output (undefined: nothing to say). */
export function pipProgressMessage(line: string): string | undefined {
  const text = line.trim();
  let m: RegExpExecArray | null;
  if ((m = /^Building wheel for (\S+)/.exec(text))) {
    return m[1].startsWith("llama") ? "building llama.cpp (a few minutes)…" : `building ${m[1]}…`;
  }
  if ((m = /^(?:Collecting|Downloading|Processing) (\S+)/.exec(text))) return `fetching ${m[1].split("/").pop()}…`;
  if (text.startsWith("Installing collected packages")) return "installing…";
  if (text.startsWith("Successfully installed")) return "installed";
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Next edits (textDocument/copilotInlineEdit, Copilot's protocol; issue 33)
// ---------------------------------------------------------------------------------------------

/** Client -> server request: the next edit for a document version at a position. */
export const NEXT_EDIT_METHOD = "textDocument/copilotInlineEdit";
/** Client -> server notification {item}: an edit was shown. */
export const DID_SHOW_NEXT_EDIT_METHOD = "textDocument/didShowInlineEdit";
/** Server -> client notification {textDocument: {uri, version}}: a next edit is ready. */
export const NEXT_EDIT_READY_METHOD = "lsp-complete/nextEditReady";

export interface LspNextEdit {
  text: string;
  range: LspRange;
  textDocument: { uri: string; version?: number | null };
  command?: LspCommand;
}

export type LspNextEditResult = { edits?: LspNextEdit[] } | null | undefined;

export interface NextEditReadyParams {
  textDocument: { uri: string; version?: number | null };
}

/** The params of NEXT_EDIT_METHOD (as Copilot's clients send them). */
export function nextEditParams(uri: string, version: number, position: LspPosition) {
  return {
    textDocument: { uri, version },
    position: { line: position.line, character: position.character },
    context: { triggerKind: 2 },
  };
}

/**
 * The edit to show from the server's answer: the first of its alternatives, when it is for
 * this document at this version (an answer for older text would land in the wrong place).
 */
export function pickNextEdit(result: LspNextEditResult, uri: string, version: number): LspNextEdit | undefined {
  const edits = result && Array.isArray(result.edits) ? result.edits : [];
  const edit = edits[0];
  if (!edit || typeof edit.text !== "string" || !isRange(edit.range)) return undefined;
  const doc = edit.textDocument;
  if (!doc || doc.uri !== uri) return undefined;
  if (typeof doc.version === "number" && doc.version !== version) return undefined;
  return edit;
}

/** Whether a nextEditReady is for the document (at the version) the user is looking at. */
export function nextEditReadyWanted(params: NextEditReadyParams, uri: string, version: number): boolean {
  const doc = params && params.textDocument;
  if (!doc || doc.uri !== uri) return false;
  return typeof doc.version !== "number" || doc.version === version;
}

/** The plain item VS Code shows for a next edit: its text over its range, as an edit; the
 * accept hook runs the edit's command. */
export function nextEditItem(edit: LspNextEdit): ConvertedItem {
  const out: ConvertedItem = { insertText: edit.text, snippet: false, range: edit.range };
  const command = toAcceptCommand(edit.command);
  if (command) out.command = command;
  return out;
}
