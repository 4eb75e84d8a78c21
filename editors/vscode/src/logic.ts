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
}

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
  model?: { name?: string; path?: string; state?: ModelState | string; device?: string };
  counters?: Record<string, unknown>;
  recent?: Array<{ latencyMs?: number } & Record<string, unknown>>;
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

/**
 * The status bar text. `status` is the last answer (undefined before the first one);
 * `connection` says whether the client is starting, running, or failed/stopped.
 */
export function formatStatus(
  status: ServerStatus | undefined,
  enabled: boolean,
  connection: "starting" | "running" | "stopped" = "running",
): StatusView {
  const name = status?.model?.name || "model";
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
      tooltip: "lsp-complete: inline completions are off. Click to turn them on.",
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
  const tooltipLines = [`lsp-complete: ${name}${device} is ready.`];
  if (latency !== undefined) tooltipLines.push(`Last suggestion: ${formatLatency(latency)}.`);
  tooltipLines.push("Click to turn inline completions off.");
  return {
    text: latency !== undefined ? `$(sparkle) lsp-complete ${formatLatency(latency)}` : "$(sparkle) lsp-complete",
    tooltip: tooltipLines.join("\n"),
  };
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
export function cursorMoveParams(uri: string, anchor: LspPosition, active: LspPosition): CursorMoveParams | undefined {
  if (anchor.line !== active.line || anchor.character !== active.character) return undefined;
  return { textDocument: { uri }, position: { line: active.line, character: active.character } };
}
