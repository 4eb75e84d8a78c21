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
  CURSOR_METHOD,
  ConvertedItem,
  InitializationOptions,
  configChangeAction,
  LspInlineCompletionResult,
  ServerStatus,
  Settings,
  convertResult,
  cursorMoveParams,
  executeCommandParams,
  formatStatus,
  formatStatusDetails,
  isLanguageEnabled,
  serverCommand,
  toInitializationOptions,
  toLspTriggerKind,
} from "./logic";

const SECTION = "lspComplete";
const ENABLED_KEY = "lspComplete.on";
/** Every file: the documents synced to the server and the ones the provider answers for. */
const SELECTOR = [{ scheme: "file" }, { scheme: "untitled" }];

let client: LanguageClient | undefined;
let clientState: "starting" | "running" | "stopped" = "stopped";
let lastStatus: ServerStatus | undefined;
let statusItem: vscode.StatusBarItem;
let output: vscode.OutputChannel;
let pollTimer: NodeJS.Timeout | undefined;
let cursorTimer: NodeJS.Timeout | undefined;
let on = true;
/** The initializationOptions the running server was started or last updated with. */
let sentOptions: InitializationOptions = {};

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
    initializationOptions: toInitializationOptions(settings),
    outputChannel: output,
    middleware: {
      // The server also puts its suggestion into textDocument/completion for editors without
      // inline completion; here the ghost text shows it, so don't run the model twice.
      provideCompletionItem: () => undefined,
    },
  };
  const c = new LanguageClient("lspComplete", "lsp-complete", serverOptions, clientOptions);
  c.registerFeature(new InlineCompletionCapability());
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

async function startClient(): Promise<void> {
  sentOptions = toInitializationOptions(readSettings());
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
        `lsp-complete: could not start the server "${command}". Install it (pip install lsp-complete) or set lspComplete.serverPath.`,
        "Open Settings",
      )
      .then((choice) => {
        if (choice) void vscode.commands.executeCommand("workbench.action.openSettings", SECTION);
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

function renderStatus(): void {
  if (!statusItem) return;
  const view = formatStatus(lastStatus, on, clientState);
  statusItem.text = view.text;
  statusItem.tooltip = view.tooltip;
  statusItem.backgroundColor =
    view.severity === "error"
      ? new vscode.ThemeColor("statusBarItem.errorBackground")
      : view.severity === "warning"
        ? new vscode.ThemeColor("statusBarItem.warningBackground")
        : undefined;
  statusItem.command =
    clientState === "stopped" || lastStatus?.model?.state === "error" ? "lspComplete.showStatus" : "lspComplete.toggle";
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
  if (!editor || !on) return;
  cursorTimer = setTimeout(() => {
    cursorTimer = undefined;
    const c = client;
    const document = editor.document;
    if (!c || clientState !== "running" || !["file", "untitled"].includes(document.uri.scheme)) return;
    if (!isLanguageEnabled(readSettings().enabled, document.languageId)) return;
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
    if (!on || !c || clientState !== "running") return undefined;
    if (!isLanguageEnabled(readSettings().enabled, document.languageId)) return undefined;
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

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("lsp-complete");
  on = context.globalState.get<boolean>(ENABLED_KEY, true);
  statusItem = vscode.window.createStatusBarItem("lspComplete.status", vscode.StatusBarAlignment.Right, 100);
  statusItem.name = "lsp-complete";
  renderStatus();
  statusItem.show();

  context.subscriptions.push(
    output,
    statusItem,
    vscode.languages.registerInlineCompletionItemProvider(SELECTOR, new Provider()),
    vscode.commands.registerCommand("lspComplete.toggle", async () => {
      on = !on;
      await context.globalState.update(ENABLED_KEY, on);
      renderStatus();
      void vscode.window.setStatusBarMessage(`lsp-complete: inline completions ${on ? "on" : "off"}`, 2000);
    }),
    vscode.commands.registerCommand("lspComplete.showStatus", async () => {
      await pollStatus();
      output.appendLine("");
      output.appendLine(`--- status ${new Date().toLocaleTimeString()} ---`);
      output.appendLine(`Server: ${clientState}`);
      output.appendLine(formatStatusDetails(lastStatus, on));
      output.show(true);
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
    vscode.window.onDidChangeActiveTextEditor((editor) => cursorMoved(editor)),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration(SECTION)) {
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
  );

  await startClient();
  updatePolling();
}

export async function deactivate(): Promise<void> {
  if (pollTimer) clearInterval(pollTimer);
  pollTimer = undefined;
  await stopClient();
}
