import { spawn } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import * as vscode from "vscode";
import {
  ClientCapabilities,
  FeatureState,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  StaticFeature,
} from "vscode-languageclient/node";
import {
  ACCEPT_COMMAND_ID,
  CURSOR_DEBOUNCE_MS,
  BLOCK_READY_METHOD,
  BlockReadyParams,
  CURSOR_METHOD,
  DID_SHOW_NEXT_EDIT_METHOD,
  LspNextEditResult,
  NEXT_EDIT_METHOD,
  NEXT_EDIT_READY_METHOD,
  NextEditReadyParams,
  blockStillWanted,
  nextEditItem,
  nextEditParams,
  nextEditReadyWanted,
  pickNextEdit,
  ConvertedItem,
  INSTALL_HINT,
  InitializationOptions,
  MenuAction,
  PYTHON_VERSION_ARGS,
  configChangeAction,
  LspInlineCompletionResult,
  ServerStatus,
  Settings,
  convertResult,
  cursorMoveParams,
  doctorCommand,
  executeCommandParams,
  findExecutable,
  formatDoctorReport,
  formatStatus,
  formatStatusDetails,
  installSourceKind,
  isLanguageEnabled,
  isRecentPython,
  menuItems,
  parsePythonVersion,
  pipInstallArgs,
  pipProgressMessage,
  pythonCandidates,
  serverCommand,
  setLanguageEnabled,
  snoozeLeftMs,
  toInitializationOptions,
  CLIENT_OPTIONS,
  toLspTriggerKind,
  venvLayout,
} from "./logic";

const SECTION = "lspComplete";
const ENABLED_KEY = "lspComplete.on";
const SNOOZE_KEY = "lspComplete.snoozedUntil";
/** Every file: the documents synced to the server and the ones the provider answers for. */
const SELECTOR = [{ scheme: "file" }, { scheme: "untitled" }];

let client: LanguageClient | undefined;
/** "missing": the server command is not installed (the status item offers the setup). */
let clientState: "starting" | "running" | "stopped" | "missing" = "stopped";
let extensionContext: vscode.ExtensionContext;
let snoozeTimer: NodeJS.Timeout | undefined;
let lastStatus: ServerStatus | undefined;
let statusItem: vscode.StatusBarItem;
let output: vscode.OutputChannel;
let pollTimer: NodeJS.Timeout | undefined;
let cursorTimer: NodeJS.Timeout | undefined;
let on = true;
/** The initializationOptions the running server was started or last updated with. */
let sentOptions: InitializationOptions = {};
/** The server said a next edit is ready for this document version: the provider asks for it. */
let nextEditReady: { uri: string; version: number } | undefined;

/**
 * Tells the server that this client shows inline completions itself (LSP 3.18), so that it does
 * not also put its AI item into `textDocument/completion`. vscode-languageclient 9 only has this
 * capability as a proposed feature, and we register our own provider instead of that feature.
 */
class InlineCompletionCapability implements StaticFeature {
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    const td = (capabilities.textDocument ??= {}) as Record<string, unknown>;
    td.inlineCompletion = { dynamicRegistration: false };
  }
  initialize(): void {}
  getState(): FeatureState {
    return { kind: "static" };
  }
  clear(): void {}
}

function readSettings(): Settings {
  const c = vscode.workspace.getConfiguration(SECTION);
  return {
    serverPath: c.get<string>("serverPath"),
    serverArgs: c.get<string[]>("serverArgs"),
    model: c.get<string>("model"),
    threads: c.get<number | null>("threads"),
    contextSize: c.get<number | null>("contextSize"),
    gpuLayers: c.get<number | null>("gpuLayers"),
    maxTokens: c.get<number | null>("maxTokens"),
    multiline: c.get<string>("multiline"),
    enabled: c.get<Record<string, unknown>>("enabled"),
    debounceMs: c.get<number | null>("debounceMs"),
    nextEdit: c.get<boolean>("nextEdit"),
    nextEditModel: c.get<string>("nextEditModel"),
  };
}

function createClient(): LanguageClient {
  const settings = readSettings();
  const { command, args } = serverCommand(settings);
  // No `transport`: stdio all the same, but TransportKind.stdio would append `--stdio` to the
  // arguments, which `lsp-complete serve` rejects (the server exited with code 2).
  const serverOptions: ServerOptions = {
    run: { command, args },
    debug: { command, args: [...args] },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: SELECTOR,
    initializationOptions: { ...toInitializationOptions(settings), ...CLIENT_OPTIONS },
    outputChannel: output,
    middleware: {
      // The server also puts its suggestion into textDocument/completion for editors without
      // inline completion; here the ghost text shows it, so don't run the model twice.
      provideCompletionItem: () => undefined,
    },
  };
  const c = new LanguageClient("lspComplete", "lsp-complete", serverOptions, clientOptions);
  c.registerFeature(new InlineCompletionCapability());
  c.onNotification(BLOCK_READY_METHOD, (params: BlockReadyParams) => {
    const editor = vscode.window.activeTextEditor;
    if (client !== c || !editor) return;
    const uri = c.code2ProtocolConverter.asUri(editor.document.uri);
    const cursor = c.code2ProtocolConverter.asPosition(editor.selection.active);
    if (blockStillWanted(params, uri, cursor)) {
      void vscode.commands.executeCommand("editor.action.inlineSuggest.trigger");
    }
  });
  c.onNotification(NEXT_EDIT_READY_METHOD, (params: NextEditReadyParams) => {
    const editor = vscode.window.activeTextEditor;
    if (client !== c || !editor || readSettings().nextEdit === false) return;
    const uri = c.code2ProtocolConverter.asUri(editor.document.uri);
    const version = editor.document.version;
    if (!nextEditReadyWanted(params, uri, version)) return;
    // Ask through VS Code's inline suggestions: the provider then fetches the edit.
    nextEditReady = { uri, version };
    void vscode.commands.executeCommand("editor.action.inlineSuggest.trigger");
  });
  c.onDidChangeState((e) => {
    if (client !== c) return; // an old client stopping during a restart
    clientState =
      e.newState === State.Running ? "running" : e.newState === State.Starting ? "starting" : "stopped";
    if (clientState !== "running") lastStatus = undefined;
    renderStatus();
    if (clientState === "running") void pollStatus();
  });
  return c;
}

function isExecutableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    if (process.platform !== "win32") accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The server command is installed: an executable file, or a name found on the PATH. */
function serverInstalled(): boolean {
  const { command } = serverCommand(readSettings());
  return findExecutable(command, process.env.PATH, process.platform, isExecutableFile, process.env.PATHEXT) !== undefined;
}

/** No server to start: say so in the status bar and offer the guided setup, not an error. */
function offerSetup(): void {
  const { command } = serverCommand(readSettings());
  output.appendLine(`lsp-complete: the server command "${command}" is not installed; ${INSTALL_HINT}.`);
  void vscode.window
    .showInformationMessage(
      `lsp-complete needs its server ("${command}" is not installed): ${INSTALL_HINT}. Or set it up in a private Python environment now.`,
      "Set Up…",
      "Choose Executable…",
      "Open Settings",
    )
    .then((choice) => {
      if (choice === "Set Up…") void vscode.commands.executeCommand("lspComplete.setupServer");
      else if (choice === "Choose Executable…") void chooseExecutable();
      else if (choice === "Open Settings")
        void vscode.commands.executeCommand("workbench.action.openSettings", `${SECTION}.serverPath`);
    });
}

async function startClient(): Promise<void> {
  sentOptions = toInitializationOptions(readSettings());
  if (!serverInstalled()) {
    clientState = "missing";
    renderStatus();
    offerSetup();
    return;
  }
  client = createClient();
  clientState = "starting";
  renderStatus();
  try {
    await client.start();
  } catch (err) {
    clientState = "stopped";
    renderStatus();
    const { command } = serverCommand(readSettings());
    output.appendLine(`lsp-complete: could not start the server (${command}): ${String(err)}`);
    void vscode.window
      .showErrorMessage(
        `lsp-complete: could not start the server "${command}" (see Output → lsp-complete). Run "lsp-complete: Show server status" for a diagnosis.`,
        "Show Status",
        "Open Settings",
      )
      .then((choice) => {
        if (choice === "Show Status") void vscode.commands.executeCommand("lspComplete.showStatus");
        else if (choice) void vscode.commands.executeCommand("workbench.action.openSettings", SECTION);
      });
  }
}

async function stopClient(): Promise<void> {
  const c = client;
  client = undefined;
  clientState = "stopped";
  if (c) {
    try {
      await c.stop(2000);
    } catch {
      // already dead
    }
  }
}

async function restartClient(): Promise<void> {
  await stopClient();
  await startClient();
}

/** A changed setting: restart the server, or send it workspace/didChangeConfiguration. */
async function applyConfigChange(e: vscode.ConfigurationChangeEvent): Promise<void> {
  const commandChanged = ["serverPath", "serverArgs"].some((k) => e.affectsConfiguration(`${SECTION}.${k}`));
  const next = toInitializationOptions(readSettings());
  const action = configChangeAction(sentOptions, next, commandChanged);
  if (action === "none") return;
  if (clientState === "missing" && !commandChanged) return; // still nothing to start
  if (action === "restart" || !client || clientState !== "running") {
    await restartClient();
    return;
  }
  try {
    // The server applies these like initializationOptions (and reloads the model if needed).
    await client.sendNotification("workspace/didChangeConfiguration", { settings: { lspComplete: next } });
    sentOptions = next;
  } catch (err) {
    output.appendLine(`workspace/didChangeConfiguration failed: ${String(err)}; restarting`);
    await restartClient();
  }
}

function snoozedUntil(): number | undefined {
  const until = extensionContext?.globalState.get<number>(SNOOZE_KEY);
  return snoozeLeftMs(until, Date.now()) > 0 ? until : undefined;
}

/** Suggestions are wanted now: on, not snoozed, on for this language. */
function active(languageId: string): boolean {
  return on && snoozedUntil() === undefined && isLanguageEnabled(readSettings().enabled, languageId);
}

function activeLanguage(): string | undefined {
  const document = vscode.window.activeTextEditor?.document;
  return document && ["file", "untitled"].includes(document.uri.scheme) ? document.languageId : undefined;
}

function renderStatus(): void {
  if (!statusItem) return;
  const languageId = activeLanguage();
  const view = formatStatus(lastStatus, on, clientState, {
    snoozedUntil: snoozedUntil(),
    languageId,
    languageEnabled: languageId ? isLanguageEnabled(readSettings().enabled, languageId) : undefined,
  });
  statusItem.text = view.text;
  statusItem.tooltip = view.tooltip;
  statusItem.backgroundColor =
    view.severity === "error"
      ? new vscode.ThemeColor("statusBarItem.errorBackground")
      : view.severity === "warning"
        ? new vscode.ThemeColor("statusBarItem.warningBackground")
        : undefined;
  statusItem.command = "lspComplete.menu";
}

/** Snooze for `minutes` (0: resume now); every window of this VS Code shares it. */
async function snooze(minutes: number): Promise<void> {
  const until = minutes > 0 ? Date.now() + minutes * 60000 : undefined;
  await extensionContext.globalState.update(SNOOZE_KEY, until);
  scheduleSnoozeEnd();
  renderStatus();
  void vscode.window.setStatusBarMessage(
    minutes > 0 ? `lsp-complete: snoozed for ${minutes} minutes` : "lsp-complete: resumed",
    2000,
  );
}

/** Redraw the status item when the snooze ends. */
function scheduleSnoozeEnd(): void {
  if (snoozeTimer) clearTimeout(snoozeTimer);
  snoozeTimer = undefined;
  const left = snoozeLeftMs(snoozedUntil(), Date.now());
  if (left > 0) {
    // Also every minute, so that the minutes left stay right.
    snoozeTimer = setTimeout(() => {
      renderStatus();
      scheduleSnoozeEnd();
    }, Math.min(left, 60000) + 50);
  }
}

async function setLanguage(languageId: string, wanted: boolean): Promise<void> {
  const config = vscode.workspace.getConfiguration(SECTION);
  await config.update("enabled", setLanguageEnabled(config.get("enabled"), languageId, wanted), vscode.ConfigurationTarget.Global);
  renderStatus();
  void vscode.window.setStatusBarMessage(`lsp-complete: ${wanted ? "on" : "off"} for ${languageId}`, 2000);
}

async function toggle(): Promise<void> {
  on = !on;
  await extensionContext.globalState.update(ENABLED_KEY, on);
  renderStatus();
  void vscode.window.setStatusBarMessage(`lsp-complete: inline completions ${on ? "on" : "off"}`, 2000);
}

/** The status bar item's menu: snooze, this language on/off, everything on/off, status. */
async function showMenu(): Promise<void> {
  const languageId = activeLanguage();
  const items = menuItems({
    enabled: on,
    snoozedUntil: snoozedUntil(),
    languageId,
    languageEnabled: languageId ? isLanguageEnabled(readSettings().enabled, languageId) : undefined,
    missing: clientState === "missing",
  });
  const editor = vscode.window.activeTextEditor;
  const picked = await vscode.window.showQuickPick(items, { title: "lsp-complete", placeHolder: "lsp-complete" });
  if (!picked) return;
  await runMenuAction(picked.action);
  // A click on the status bar item leaves the focus there: give it back to the editor, so that
  // typing goes on where it was.
  if (editor && picked.action.kind !== "setup") {
    await vscode.window.showTextDocument(editor.document, { viewColumn: editor.viewColumn, preserveFocus: false });
  }
}

async function runMenuAction(action: MenuAction): Promise<void> {
  switch (action.kind) {
    case "snooze":
      return snooze(action.minutes);
    case "resume":
      return snooze(0);
    case "language":
      return setLanguage(action.languageId, action.on);
    case "toggle":
      return toggle();
    case "showStatus":
      return void (await vscode.commands.executeCommand("lspComplete.showStatus"));
    case "restart":
      return restartClient();
    case "setup":
      return void (await vscode.commands.executeCommand("lspComplete.setupServer"));
  }
}

/** Run a command; resolves with its output and exit code, never rejects. */
function runProcess(
  command: string,
  args: string[],
  options: { onLine?: (line: string) => void; token?: vscode.CancellationToken; timeoutMs?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string; error?: string }> {
  return new Promise((resolve) => {
    let stdout = "";
    let stderr = "";
    let child;
    try {
      child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
    } catch (err) {
      resolve({ code: null, stdout, stderr, error: String(err) });
      return;
    }
    const timer = options.timeoutMs ? setTimeout(() => child.kill(), options.timeoutMs) : undefined;
    const cancel = options.token?.onCancellationRequested(() => child.kill());
    const lines = (chunk: Buffer, into: "out" | "err") => {
      const text = chunk.toString();
      if (into === "out") stdout += text;
      else stderr += text;
      if (options.onLine) for (const line of text.split(/\r?\n/)) if (line.trim() !== "") options.onLine(line);
    };
    child.stdout?.on("data", (c: Buffer) => lines(c, "out"));
    child.stderr?.on("data", (c: Buffer) => lines(c, "err"));
    child.on("error", (err) => {
      if (timer) clearTimeout(timer);
      cancel?.dispose();
      resolve({ code: null, stdout, stderr, error: String(err) });
    });
    child.on("close", (code) => {
      if (timer) clearTimeout(timer);
      cancel?.dispose();
      resolve({ code, stdout, stderr });
    });
  });
}

/** `lsp-complete doctor --json` with the configured server command, as text. */
async function runDoctor(): Promise<string> {
  const command = doctorCommand(readSettings());
  if (!command) return "lsp-complete doctor: lspComplete.serverArgs has no \"serve\"; run the doctor by hand.";
  const done = await runProcess(command.command, command.args, { timeoutMs: 120000 });
  const report = formatDoctorReport(done.stdout);
  if (report) return report;
  return `lsp-complete doctor could not run (${done.error ?? `exit ${done.code}`}): ${done.stderr.trim()}\n${INSTALL_HINT}`;
}

async function chooseExecutable(): Promise<void> {
  const picked = await vscode.window.showOpenDialog({
    canSelectMany: false,
    title: "The lsp-complete executable (e.g. .venv/bin/lsp-complete)",
    openLabel: "Use as lsp-complete",
  });
  if (!picked?.[0]) return;
  // serverPath is machine-scoped: user settings.
  await vscode.workspace.getConfiguration(SECTION).update("serverPath", picked[0].fsPath, vscode.ConfigurationTarget.Global);
}

/** A Python 3.11+ on this machine, or undefined. */
async function findPython(): Promise<{ command: string; args: string[] } | undefined> {
  for (const candidate of pythonCandidates(process.platform)) {
    const done = await runProcess(candidate.command, [...candidate.args, ...PYTHON_VERSION_ARGS], { timeoutMs: 20000 });
    if (done.code === 0 && isRecentPython(parsePythonVersion(done.stdout))) return candidate;
  }
  return undefined;
}

/**
 * Guided setup: the user picks a checkout of lsp-complete or a built wheel; the extension
 * creates a private Python environment in its storage folder, pip-installs the server with its
 * default model there (with progress), points lspComplete.serverPath at it and checks it with
 * `lsp-complete doctor`.
 */
async function setupServer(): Promise<void> {
  const kind = await vscode.window.showQuickPick(
    [
      { label: "$(folder) A checkout of lsp-complete", description: "the folder with pyproject.toml", folder: true },
      { label: "$(package) A built wheel", description: "lsp_complete-*.whl (pip wheel --no-deps -w dist .)", folder: false },
    ],
    { title: "lsp-complete: install the server from" },
  );
  if (!kind) return;
  const picked = await vscode.window.showOpenDialog({
    canSelectFiles: !kind.folder,
    canSelectFolders: kind.folder,
    canSelectMany: false,
    filters: kind.folder ? undefined : { Wheel: ["whl"] },
    openLabel: "Install from here",
  });
  const source = picked?.[0]?.fsPath;
  if (!source) return;
  let isDirectory = false;
  try {
    isDirectory = statSync(source).isDirectory();
  } catch {
    // not there any more: installSourceKind says no
  }
  if (!installSourceKind(source, isDirectory)) {
    void vscode.window.showErrorMessage(`lsp-complete: ${source} is neither a folder nor a .whl file.`);
    return;
  }
  const python = await findPython();
  if (!python) {
    void vscode.window.showErrorMessage("lsp-complete: no Python 3.11 or newer found on the PATH; install one, then set up again.");
    return;
  }
  const dir = vscode.Uri.joinPath(extensionContext.globalStorageUri, "server-venv").fsPath;
  const layout = venvLayout(dir, process.platform);
  output.show(true);
  const ok = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: "lsp-complete: installing the server", cancellable: true },
    async (progress, token) => {
      const log = (line: string) => output.appendLine(line);
      progress.report({ message: "creating a private Python environment…" });
      output.appendLine(`$ ${python.command} ${[...python.args, "-m", "venv", dir].join(" ")}`);
      const venv = await runProcess(python.command, [...python.args, "-m", "venv", dir], { onLine: log, token });
      if (venv.code !== 0 || token.isCancellationRequested) return false;
      progress.report({ message: "installing (the first install builds llama.cpp: a few minutes)…" });
      const args = pipInstallArgs(source);
      output.appendLine(`$ ${layout.python} ${args.join(" ")}`);
      const pip = await runProcess(layout.python, args, {
        token,
        onLine: (line) => {
          log(line);
          const message = pipProgressMessage(line);
          if (message) progress.report({ message });
        },
      });
      return pip.code === 0 && !token.isCancellationRequested;
    },
  );
  if (!ok) {
    void vscode.window.showErrorMessage("lsp-complete: the server was not installed (see Output → lsp-complete).");
    return;
  }
  const config = vscode.workspace.getConfiguration(SECTION);
  const unchanged = config.get<string>("serverPath") === layout.server;
  // A changed serverPath restarts the server (onDidChangeConfiguration); the same one does not.
  await config.update("serverArgs", undefined, vscode.ConfigurationTarget.Global);
  await config.update("serverPath", layout.server, vscode.ConfigurationTarget.Global);
  if (unchanged) await restartClient();
  output.appendLine(await runDoctor());
}

async function pollStatus(): Promise<void> {
  const c = client;
  if (!c || clientState !== "running") return;
  try {
    lastStatus = await c.sendRequest<ServerStatus>("lsp-complete/status", {});
  } catch (err) {
    output.appendLine(`lsp-complete/status failed: ${String(err)}`);
  }
  renderStatus();
}

/** Polls lsp-complete/status every few seconds while the window is focused. */
function updatePolling(): void {
  const seconds = Math.max(1, vscode.workspace.getConfiguration(SECTION).get<number>("statusPollSeconds") ?? 3);
  const wanted = vscode.window.state.focused;
  if (wanted && !pollTimer) {
    pollTimer = setInterval(() => void pollStatus(), seconds * 1000);
    void pollStatus();
  } else if (!wanted && pollTimer) {
    clearInterval(pollTimer);
    pollTimer = undefined;
  }
}

function toVscodeItem(c: LanguageClient, item: ConvertedItem): vscode.InlineCompletionItem {
  const text = item.snippet ? new vscode.SnippetString(item.insertText) : item.insertText;
  const range = item.range ? c.protocol2CodeConverter.asRange(item.range) : undefined;
  const result = new vscode.InlineCompletionItem(text, range, item.command);
  if (item.filterText !== undefined) result.filterText = item.filterText;
  return result;
}

/**
 * The cursor moved (a click, a jump, another tab): once it rests, tell the server, which then
 * prepares the prompt for that spot in idle time, so the first keystroke there is as cheap as
 * the rest. Typing moves the cursor too; the server ignores moves inside the region it has ready.
 */
function cursorMoved(editor: vscode.TextEditor | undefined): void {
  if (cursorTimer) clearTimeout(cursorTimer);
  cursorTimer = undefined;
  if (!editor || !active(editor.document.languageId)) return;
  cursorTimer = setTimeout(() => {
    cursorTimer = undefined;
    const c = client;
    const document = editor.document;
    if (!c || clientState !== "running" || !["file", "untitled"].includes(document.uri.scheme)) return;
    if (!active(document.languageId)) return;
    const params = cursorMoveParams(
      c.code2ProtocolConverter.asUri(document.uri),
      c.code2ProtocolConverter.asPosition(editor.selection.anchor),
      c.code2ProtocolConverter.asPosition(editor.selection.active),
    );
    if (params) {
      c.sendNotification(CURSOR_METHOD, params).catch((err) =>
        output.appendLine(`${CURSOR_METHOD} failed: ${String(err)}`),
      );
    }
  }, CURSOR_DEBOUNCE_MS);
}

class Provider implements vscode.InlineCompletionItemProvider {
  async provideInlineCompletionItems(
    document: vscode.TextDocument,
    position: vscode.Position,
    context: vscode.InlineCompletionContext,
    token: vscode.CancellationToken,
  ): Promise<vscode.InlineCompletionList | undefined> {
    const c = client;
    if (!c || clientState !== "running" || !active(document.languageId)) return undefined;
    // Asked because the server announced a next edit for this text: show that (the trigger is
    // an explicit one, which would otherwise make the server compute alternatives).
    if (nextEditWanted(c, document)) {
      const edit = await nextEdit(c, document, position, token);
      if (edit) return new vscode.InlineCompletionList([edit]);
      if (token.isCancellationRequested) return undefined;
    }
    const params = {
      textDocument: c.code2ProtocolConverter.asTextDocumentIdentifier(document),
      position: c.code2ProtocolConverter.asPosition(position),
      context: {
        triggerKind: toLspTriggerKind(context.triggerKind),
        selectedCompletionInfo: context.selectedCompletionInfo
          ? {
              range: c.code2ProtocolConverter.asRange(context.selectedCompletionInfo.range),
              text: context.selectedCompletionInfo.text,
            }
          : undefined,
      },
    };
    let result: LspInlineCompletionResult;
    try {
      // Passing VS Code's token makes the client send $/cancelRequest when it fires.
      result = await c.sendRequest<LspInlineCompletionResult>("textDocument/inlineCompletion", params, token);
    } catch (err) {
      if (!token.isCancellationRequested) output.appendLine(`textDocument/inlineCompletion failed: ${String(err)}`);
      return undefined;
    }
    if (token.isCancellationRequested) return undefined;
    const items = convertResult(result).map((item) => toVscodeItem(c, item));
    return new vscode.InlineCompletionList(items);
  }
}

/** Whether to ask for a next edit: the server announced one for this document version. */
function nextEditWanted(c: LanguageClient, document: vscode.TextDocument): boolean {
  const ready = nextEditReady;
  if (!ready || readSettings().nextEdit === false) return false;
  if (ready.version !== document.version) {
    nextEditReady = undefined; // typed since: that edit is gone
    return false;
  }
  return ready.uri === c.code2ProtocolConverter.asUri(document.uri);
}

/**
 * The server's next edit, as an inline completion item whose range is the text it replaces
 * (VS Code shows an item whose range spans lines as an edit); accepting it runs the edit's
 * command. The server is told it was shown when it is handed to VS Code (the stable API has no
 * "shown" hook for inline completions).
 */
async function nextEdit(
  c: LanguageClient,
  document: vscode.TextDocument,
  position: vscode.Position,
  token: vscode.CancellationToken,
): Promise<vscode.InlineCompletionItem | undefined> {
  const uri = c.code2ProtocolConverter.asUri(document.uri);
  const version = document.version;
  let result: LspNextEditResult;
  try {
    result = await c.sendRequest<LspNextEditResult>(
      NEXT_EDIT_METHOD,
      nextEditParams(uri, version, c.code2ProtocolConverter.asPosition(position)),
      token,
    );
  } catch (err) {
    if (!token.isCancellationRequested) output.appendLine(`${NEXT_EDIT_METHOD} failed: ${String(err)}`);
    return undefined;
  }
  nextEditReady = undefined;
  if (token.isCancellationRequested || document.version !== version) return undefined;
  const edit = pickNextEdit(result, uri, version);
  if (!edit) return undefined;
  c.sendNotification(DID_SHOW_NEXT_EDIT_METHOD, { item: edit }).catch((err) =>
    output.appendLine(`${DID_SHOW_NEXT_EDIT_METHOD} failed: ${String(err)}`),
  );
  return toVscodeItem(c, nextEditItem(edit));
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  extensionContext = context;
  output = vscode.window.createOutputChannel("lsp-complete");
  on = context.globalState.get<boolean>(ENABLED_KEY, true);
  scheduleSnoozeEnd();
  statusItem = vscode.window.createStatusBarItem("lspComplete.status", vscode.StatusBarAlignment.Right, 100);
  statusItem.name = "lsp-complete";
  renderStatus();
  statusItem.show();

  context.subscriptions.push(
    output,
    statusItem,
    vscode.languages.registerInlineCompletionItemProvider(SELECTOR, new Provider()),
    vscode.commands.registerCommand("lspComplete.toggle", () => toggle()),
    vscode.commands.registerCommand("lspComplete.menu", () => showMenu()),
    vscode.commands.registerCommand("lspComplete.snooze", async (minutes?: unknown) => {
      if (typeof minutes === "number") return snooze(minutes);
      const items = menuItems({ enabled: on, snoozedUntil: snoozedUntil() }).filter(
        (i) => i.action.kind === "snooze" || i.action.kind === "resume",
      );
      const picked = await vscode.window.showQuickPick(items, { title: "lsp-complete: snooze" });
      if (picked) await runMenuAction(picked.action);
    }),
    vscode.commands.registerCommand("lspComplete.toggleLanguage", async (languageId?: unknown) => {
      const lang = typeof languageId === "string" ? languageId : activeLanguage();
      if (lang) await setLanguage(lang, !isLanguageEnabled(readSettings().enabled, lang));
    }),
    vscode.commands.registerCommand("lspComplete.setupServer", () => setupServer()),
    vscode.commands.registerCommand("lspComplete.showStatus", async () => {
      await pollStatus();
      output.appendLine("");
      output.appendLine(`--- status ${new Date().toLocaleTimeString()} ---`);
      output.appendLine(`Server: ${clientState}`);
      output.appendLine(formatStatusDetails(lastStatus, on));
      output.show(true);
      output.appendLine(await runDoctor());
    }),
    vscode.commands.registerCommand("lspComplete.restart", () => restartClient()),
    vscode.commands.registerCommand(ACCEPT_COMMAND_ID, async (arg: unknown) => {
      const params = executeCommandParams(arg);
      if (!params || !client || clientState !== "running") return;
      try {
        await client.sendRequest("workspace/executeCommand", params);
      } catch (err) {
        output.appendLine(`workspace/executeCommand ${params.command} failed: ${String(err)}`);
      }
    }),
    vscode.window.onDidChangeWindowState(() => updatePolling()),
    vscode.window.onDidChangeTextEditorSelection((e) => cursorMoved(e.textEditor)),
    vscode.window.onDidChangeActiveTextEditor((editor) => {
      cursorMoved(editor);
      renderStatus(); // "off for <language>" follows the editor
    }),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration(SECTION)) {
        renderStatus();
        if (e.affectsConfiguration(`${SECTION}.statusPollSeconds`) && pollTimer) {
          clearInterval(pollTimer);
          pollTimer = undefined;
          updatePolling();
        }
        void applyConfigChange(e);
      }
    }),
    { dispose: () => pollTimer && clearInterval(pollTimer) },
    { dispose: () => cursorTimer && clearTimeout(cursorTimer) },
    { dispose: () => snoozeTimer && clearTimeout(snoozeTimer) },
  );

  await startClient();
  updatePolling();
}

export async function deactivate(): Promise<void> {
  if (pollTimer) clearInterval(pollTimer);
  pollTimer = undefined;
  await stopClient();
}
