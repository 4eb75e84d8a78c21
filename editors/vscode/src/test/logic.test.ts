// Unit tests of the extension's pure logic; run with `npm test` (node's built-in test runner),
// no VS Code instance needed.
import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import {
  ACCEPT_COMMAND_ID,
  BLOCK_READY_METHOD,
  CURSOR_METHOD,
  INIT_OPTION_KEYS,
  INSTALL_HINT,
  SERVED_LANGUAGES,
  SNOOZE_MINUTES,
  configChangeAction,
  convertItem,
  blockStillWanted,
  convertResult,
  cursorMoveParams,
  doctorCommand,
  executeCommandParams,
  findExecutable,
  formatDoctorReport,
  formatDuration,
  formatLatency,
  formatStatus,
  formatStatusDetails,
  installSourceKind,
  isLanguageEnabled,
  isRecentPython,
  lastLatencyMs,
  menuItems,
  parsePythonVersion,
  pipInstallArgs,
  pipProgressMessage,
  pythonCandidates,
  serverCommand,
  setLanguageEnabled,
  snoozeLeftMs,
  toInitializationOptions,
  toLspTriggerKind,
  venvLayout,
  NEXT_EDIT_METHOD,
  DID_SHOW_NEXT_EDIT_METHOD,
  NEXT_EDIT_READY_METHOD,
  nextEditItem,
  nextEditParams,
  nextEditReadyWanted,
  pickNextEdit,
} from "../logic";

const range = { start: { line: 3, character: 4 }, end: { line: 3, character: 9 } };
const serverCmd = {
  title: "accept",
  command: "lsp-complete.accepted",
  arguments: [{ uri: "file:///a.py", id: "7" }],
};

describe("toInitializationOptions", () => {
  it("leaves out unset and empty settings", () => {
    assert.deepEqual(
      toInitializationOptions({
        serverPath: "lsp-complete",
        model: "",
        threads: null,
        contextSize: null,
        gpuLayers: null,
        maxTokens: null,
        multiline: "auto",
        enabled: {},
        debounceMs: null,
      }),
      { multiline: "auto" },
    );
    assert.deepEqual(toInitializationOptions({}), {});
  });

  it("maps every setting to its camelCase option", () => {
    assert.deepEqual(
      toInitializationOptions({
        model: " qwen2.5-coder-0.5b ",
        threads: 4,
        contextSize: 4096,
        gpuLayers: -1,
        maxTokens: 48.7,
        multiline: "never",
        enabled: { markdown: false, python: true, bogus: "yes" },
        debounceMs: 0,
      }),
      {
        model: "qwen2.5-coder-0.5b",
        threads: 4,
        contextSize: 4096,
        gpuLayers: -1,
        maxTokens: 48,
        multiline: "never",
        enabled: { markdown: false, python: true },
        debounceMs: 0,
      },
    );
  });

  it("drops invalid values", () => {
    assert.deepEqual(
      toInitializationOptions({ threads: 0, maxTokens: -3, multiline: "sometimes", debounceMs: NaN, gpuLayers: -5 }),
      {},
    );
  });

  it("only produces keys the server knows", () => {
    const opts = toInitializationOptions({
      model: "m",
      threads: 1,
      contextSize: 512,
      gpuLayers: 0,
      maxTokens: 8,
      multiline: "always",
      enabled: { go: false },
      debounceMs: 10,
      nextEdit: false,
      nextEditModel: " sweep-next-edit-1.5b ",
    });
    assert.deepEqual(Object.keys(opts).sort(), [...INIT_OPTION_KEYS].sort());
    assert.equal(opts.nextEdit, "off");
    assert.equal(opts.nextEditModel, "sweep-next-edit-1.5b");
    assert.equal(toInitializationOptions({ nextEdit: true }).nextEdit, "on");
    assert.equal(toInitializationOptions({ nextEditModel: " " }).nextEditModel, undefined);
    assert.equal(toInitializationOptions({ nextEdit: null }).nextEdit, undefined);
  });
});

describe("configChangeAction", () => {
  it("restarts when the command changes or an option is removed", () => {
    assert.equal(configChangeAction({}, {}, true), "restart");
    assert.equal(configChangeAction({ model: "a" }, {}, false), "restart");
  });
  it("updates when an option is added or changed", () => {
    assert.equal(configChangeAction({}, { maxTokens: 32 }, false), "update");
    assert.equal(configChangeAction({ enabled: { go: false } }, { enabled: { go: true } }, false), "update");
  });
  it("does nothing when nothing the server sees changed", () => {
    assert.equal(configChangeAction({ multiline: "auto" }, { multiline: "auto" }, false), "none");
  });
});

describe("serverCommand", () => {
  it("defaults to `lsp-complete serve`", () => {
    assert.deepEqual(serverCommand({}), { command: "lsp-complete", args: ["serve"] });
    assert.deepEqual(serverCommand({ serverPath: "  ", serverArgs: [] }), { command: "lsp-complete", args: ["serve"] });
  });
  it("takes a custom executable and arguments", () => {
    assert.deepEqual(serverCommand({ serverPath: "/usr/bin/python3", serverArgs: ["-m", "lsp_complete", "serve"] }), {
      command: "/usr/bin/python3",
      args: ["-m", "lsp_complete", "serve"],
    });
  });
});

describe("isLanguageEnabled", () => {
  it("is on unless turned off", () => {
    assert.equal(isLanguageEnabled(undefined, "python"), true);
    assert.equal(isLanguageEnabled({}, "python"), true);
    assert.equal(isLanguageEnabled({ python: false }, "python"), false);
    assert.equal(isLanguageEnabled({ python: false }, "go"), true);
    assert.equal(isLanguageEnabled({ "*": false, go: true }, "go"), true);
    assert.equal(isLanguageEnabled({ "*": false, go: true }, "rust"), false);
  });
});

describe("convertItem / convertResult", () => {
  it("converts a plain item with range and command", () => {
    const item = convertItem({ insertText: "return x", range, command: serverCmd });
    assert.deepEqual(item, {
      insertText: "return x",
      snippet: false,
      range,
      command: {
        title: "accept",
        command: ACCEPT_COMMAND_ID,
        arguments: [{ command: "lsp-complete.accepted", arguments: [{ uri: "file:///a.py", id: "7" }] }],
      },
    });
  });

  it("keeps snippets as snippets", () => {
    assert.deepEqual(convertItem({ insertText: { kind: "snippet", value: "f(${1:x})" } }), {
      insertText: "f(${1:x})",
      snippet: true,
    });
  });

  it("skips empty and broken items, ignores a broken range", () => {
    assert.equal(convertItem({ insertText: "" }), undefined);
    assert.equal(convertItem({ insertText: 42 as unknown as string }), undefined);
    const bad = convertItem({ insertText: "x", range: { start: { line: 1 } } as never });
    assert.deepEqual(bad, { insertText: "x", snippet: false });
  });

  it("accepts a list, an array or null", () => {
    assert.deepEqual(convertResult(null), []);
    assert.deepEqual(convertResult(undefined), []);
    assert.deepEqual(convertResult({ items: [] }), []);
    assert.equal(convertResult({ items: [{ insertText: "a" }, { insertText: "" }, { insertText: "b" }] }).length, 2);
    assert.equal(convertResult([{ insertText: "a" }]).length, 1);
  });

  it("round-trips the accept command to workspace/executeCommand params", () => {
    const item = convertItem({ insertText: "x", command: serverCmd })!;
    assert.deepEqual(executeCommandParams(item.command!.arguments[0]), {
      command: "lsp-complete.accepted",
      arguments: [{ uri: "file:///a.py", id: "7" }],
    });
    assert.equal(executeCommandParams(undefined), undefined);
    assert.equal(executeCommandParams({ command: "" }), undefined);
  });
});

describe("toLspTriggerKind", () => {
  it("maps VS Code's 0/1 to LSP's 1/2", () => {
    assert.equal(toLspTriggerKind(0), 1);
    assert.equal(toLspTriggerKind(1), 2);
  });
});

describe("status formatting", () => {
  const ready = {
    model: { name: "tiny", path: "/m/tiny.gguf", state: "ready", device: "cpu" },
    counters: { requests: 3, accepted: 1 },
    recent: [{ latencyMs: 120 }, { latencyMs: 85.4 }],
  };

  it("formats latency", () => {
    assert.equal(formatLatency(85.4), "85 ms");
    assert.equal(formatLatency(1234), "1.2 s");
    assert.equal(lastLatencyMs(ready), 85.4);
    assert.equal(lastLatencyMs({ recent: [] }), undefined);
    assert.equal(lastLatencyMs(undefined), undefined);
  });

  it("shows state, last latency and on/off", () => {
    assert.equal(formatStatus(ready, true).text, "$(sparkle) lsp-complete 85 ms");
    assert.match(formatStatus(ready, true).tooltip, /tiny on cpu is ready/);
    assert.equal(formatStatus({ ...ready, recent: [] }, true).text, "$(sparkle) lsp-complete");
    assert.equal(formatStatus(ready, false).text, "$(circle-slash) lsp-complete: off");
    assert.equal(formatStatus({ model: { name: "tiny", state: "loading" } }, true).text, "$(sync~spin) lsp-complete: loading");
    const err = formatStatus({ model: { name: "tiny", state: "error" } }, true);
    assert.equal(err.text, "$(error) lsp-complete: error");
    assert.equal(err.severity, "error");
    assert.equal(formatStatus(undefined, true, "starting").text, "$(sync~spin) lsp-complete");
    assert.equal(formatStatus(ready, true, "stopped").severity, "error");
  });

  it("writes a details report", () => {
    const text = formatStatusDetails(ready, true);
    assert.match(text, /Inline completions: on/);
    assert.match(text, /Model: tiny/);
    assert.match(text, /State: ready/);
    assert.match(text, /accepted: 1/);
    assert.match(text, /last 85 ms, median 85 ms over 2 requests/);
    assert.match(formatStatusDetails(undefined, false), /no answer/);
  });
});

describe("package.json", () => {
  const pkg = JSON.parse(readFileSync(join(__dirname, "..", "..", "package.json"), "utf8"));

  it("declares the contract VS Code needs", () => {
    assert.equal(pkg.main, "./out/extension.js");
    assert.match(pkg.engines.vscode, /^\^1\.9\d/);
  });

  it("activates on the served languages only (no model in a window without source files)", () => {
    assert.deepEqual(
      pkg.activationEvents,
      SERVED_LANGUAGES.map((l) => `onLanguage:${l}`),
    );
    assert.ok(!pkg.activationEvents.includes("onStartupFinished"));
    assert.ok(!pkg.activationEvents.includes("*"));
  });

  it("binds a key to 'suggest now' and to the alternatives", () => {
    const bindings = pkg.contributes.keybindings as { command: string; key: string; when: string }[];
    const trigger = bindings.find((b) => b.command === "editor.action.inlineSuggest.trigger");
    assert.deepEqual(trigger, {
      command: "editor.action.inlineSuggest.trigger",
      key: "alt+\\",
      when: "editorTextFocus && !editorReadonly",
    });
    const next = bindings.find((b) => b.command === "editor.action.inlineSuggest.showNext");
    assert.equal(next?.key, "alt+]");
  });

  it("keeps the server command machine-scoped", () => {
    const props = pkg.contributes.configuration.properties;
    assert.equal(props["lspComplete.serverPath"].scope, "machine");
    assert.equal(props["lspComplete.serverArgs"].scope, "machine");
  });

  it("contributes the commands and settings", () => {
    const commands = pkg.contributes.commands.map((c: { command: string }) => c.command);
    for (const c of [
      "lspComplete.toggle",
      "lspComplete.showStatus",
      "lspComplete.menu",
      "lspComplete.snooze",
      "lspComplete.toggleLanguage",
      "lspComplete.setupServer",
    ])
      assert.ok(commands.includes(c), c);
    const props = pkg.contributes.configuration.properties;
    for (const key of [
      "serverPath",
      "model",
      "threads",
      "maxTokens",
      "multiline",
      "enabled",
      "debounceMs",
      "nextEdit",
    ]) {
      assert.ok(`lspComplete.${key}` in props, key);
    }
    assert.equal(props["lspComplete.nextEdit"].default, false);
    assert.equal(props["lspComplete.serverPath"].default, "lsp-complete");
    assert.deepEqual(props["lspComplete.multiline"].enum, ["auto", "always", "never"]);
  });
});

describe("cursorMoveParams", () => {
  it("describes a caret, not a selection", () => {
    const at = { line: 4, character: 2 };
    assert.deepEqual(cursorMoveParams("file:///a.py", at, { ...at }), {
      textDocument: { uri: "file:///a.py" },
      position: { line: 4, character: 2 },
    });
    assert.equal(cursorMoveParams("file:///a.py", at, { line: 4, character: 7 }), undefined);
    assert.equal(CURSOR_METHOD, "lsp-complete/didMoveCursor");
  });
});

describe("blockStillWanted", () => {
  it("asks again only on the announced line, at or after its spot, in the same file", () => {
    const params = { textDocument: { uri: "file:///a.py", version: 3 }, position: { line: 4, character: 4 } };
    assert.equal(BLOCK_READY_METHOD, "lsp-complete/blockReady");
    assert.ok(blockStillWanted(params, "file:///a.py", { line: 4, character: 4 }));
    assert.ok(blockStillWanted(params, "file:///a.py", { line: 4, character: 9 })); // typed on
    assert.ok(!blockStillWanted(params, "file:///a.py", { line: 5, character: 4 }));
    assert.ok(!blockStillWanted(params, "file:///a.py", { line: 4, character: 2 }));
    assert.ok(!blockStillWanted(params, "file:///b.py", { line: 4, character: 4 }));
  });
});

describe("per-language switch", () => {
  it("writes the language out, on or off, and keeps the others", () => {
    assert.deepEqual(setLanguageEnabled(undefined, "python", false), { python: false });
    assert.deepEqual(setLanguageEnabled({ python: false, go: true, bad: "x" }, "python", true), {
      python: true,
      go: true,
    });
    // Switching back on keeps the key, so that the server is updated, not restarted.
    const before = toInitializationOptions({ enabled: { python: false } });
    const after = toInitializationOptions({ enabled: setLanguageEnabled({ python: false }, "python", true) });
    assert.equal(configChangeAction(before, after, false), "update");
  });
});

describe("snooze", () => {
  it("counts down and formats the time left", () => {
    assert.deepEqual([...SNOOZE_MINUTES], [5, 15, 60]);
    assert.equal(snoozeLeftMs(undefined, 1000), 0);
    assert.equal(snoozeLeftMs(500, 1000), 0);
    assert.equal(snoozeLeftMs(61000, 1000), 60000);
    assert.equal(formatDuration(60000), "1 min");
    assert.equal(formatDuration(14 * 60000 + 1), "15 min");
    assert.equal(formatDuration(3600000), "1 h");
  });

  it("shows in the status bar item, before the per-language state", () => {
    const ready = { model: { name: "tiny", state: "ready" }, recent: [{ latencyMs: 12 }] };
    const now = 1_000_000;
    const snoozed = formatStatus(ready, true, "running", { snoozedUntil: now + 5 * 60000, now });
    assert.equal(snoozed.text, "$(clock) lsp-complete: snoozed 5 min");
    assert.equal(formatStatus(ready, true, "running", { snoozedUntil: now - 1, now }).text, "$(sparkle) lsp-complete 12 ms");
    const off = formatStatus(ready, true, "running", { languageId: "python", languageEnabled: false });
    assert.equal(off.text, "$(circle-slash) lsp-complete: off for python");
    // Everything off wins.
    assert.equal(formatStatus(ready, false, "running", { snoozedUntil: now + 1000, now }).text, "$(circle-slash) lsp-complete: off");
  });
});

describe("status bar menu", () => {
  const kinds = (items: ReturnType<typeof menuItems>) => items.map((i) => i.action.kind);

  it("offers snoozes, this language, everything, status, restart", () => {
    const items = menuItems({ enabled: true, languageId: "python", languageEnabled: true, now: 0 });
    assert.deepEqual(kinds(items), ["snooze", "snooze", "snooze", "language", "toggle", "showStatus", "restart"]);
    assert.deepEqual(
      items.filter((i) => i.action.kind === "snooze").map((i) => i.label),
      ["$(clock) Snooze for 5 minutes", "$(clock) Snooze for 15 minutes", "$(clock) Snooze for 1 hour"],
    );
    assert.equal(items[3].label, "$(circle-slash) Turn off for python");
    assert.deepEqual(items[3].action, { kind: "language", languageId: "python", on: false });
  });

  it("offers to resume while snoozed, to turn a language back on, and the setup", () => {
    const items = menuItems({
      enabled: true,
      snoozedUntil: 10 * 60000,
      now: 0,
      languageId: "go",
      languageEnabled: false,
      missing: true,
    });
    assert.deepEqual(kinds(items), ["setup", "resume", "language", "toggle", "showStatus", "restart"]);
    assert.equal(items[1].description, "snoozed for 10 min more");
    assert.deepEqual(items[2].action, { kind: "language", languageId: "go", on: true });
    assert.equal(menuItems({ enabled: false }).find((i) => i.action.kind === "toggle")?.label, "$(check) Turn on everywhere");
  });
});

describe("status tooltip", () => {
  it("names the model and the latencies", () => {
    const view = formatStatus(
      {
        model: { name: "qwen", state: "ready", device: "cpu" },
        latency: { p50: 40, p95: 210.4, count: 17 },
        recent: [{ latencyMs: 85.4 }],
      },
      true,
    );
    const lines = view.tooltip.split("\n");
    assert.equal(lines[0], "lsp-complete: qwen on cpu is ready.");
    assert.ok(lines.includes("Model: qwen on cpu"), view.tooltip);
    assert.ok(lines.includes("Last suggestion: 85 ms (p50 40 ms, p95 210 ms over 17)"), view.tooltip);
  });

  it("says how to set up a missing server", () => {
    const view = formatStatus(undefined, true, "missing");
    assert.equal(view.text, "$(warning) lsp-complete: set up");
    assert.equal(view.severity, "warning");
  });
});

describe("doctor", () => {
  it("derives its command from the server's", () => {
    assert.deepEqual(doctorCommand({}), { command: "lsp-complete", args: ["doctor", "--json"] });
    assert.deepEqual(
      doctorCommand({ serverPath: "/usr/bin/python3", serverArgs: ["-m", "lsp_complete", "serve", "--tcp", "1"], model: "m" }),
      { command: "/usr/bin/python3", args: ["-m", "lsp_complete", "doctor", "--json", "--model", "m"] },
    );
    assert.equal(doctorCommand({ serverArgs: ["run"] }), undefined);
  });

  it("formats the --json report", () => {
    const text = formatDoctorReport(
      JSON.stringify({
        version: "0.1.0",
        ok: false,
        checks: [
          { name: "python", status: "ok", summary: "Python 3.11.7", fix: null },
          { name: "model", status: "fail", summary: "no file", fix: "pull it" },
        ],
      }),
    )!;
    assert.match(text, /server 0\.1\.0/);
    assert.match(text, /\[ok\] {3}python {2}Python 3\.11\.7/);
    assert.match(text, /\[FAIL\] model {3}no file\n {17}fix: pull it/);
    assert.match(text, /Some checks failed/);
    assert.equal(formatDoctorReport("not json"), undefined);
    assert.equal(formatDoctorReport("{}"), undefined);
  });
});

describe("guided setup", () => {
  it("finds executables on the PATH and by path", () => {
    const files = new Set(["/usr/bin/lsp-complete", "/opt/x/lsp-complete", "C:\\py\\lsp-complete.EXE".toLowerCase()]);
    const isFile = (p: string) => files.has(p) || files.has(p.toLowerCase());
    assert.equal(findExecutable("lsp-complete", "/bin:/usr/bin", "linux", isFile), "/usr/bin/lsp-complete");
    assert.equal(findExecutable("lsp-complete", "/bin", "linux", isFile), undefined);
    assert.equal(findExecutable("/opt/x/lsp-complete", undefined, "linux", isFile), "/opt/x/lsp-complete");
    assert.equal(findExecutable("/opt/y/lsp-complete", "/usr/bin", "linux", isFile), undefined);
    assert.equal(findExecutable("lsp-complete", "C:\\py", "win32", isFile, ".EXE"), "C:\\py\\lsp-complete.exe");
  });

  it("picks a Python 3.11 or newer", () => {
    assert.deepEqual(parsePythonVersion("3 12\n"), [3, 12]);
    assert.equal(parsePythonVersion("Python 3.12"), undefined);
    assert.equal(isRecentPython([3, 11]), true);
    assert.equal(isRecentPython([3, 10]), false);
    assert.equal(isRecentPython([4, 0]), true);
    assert.equal(isRecentPython(undefined), false);
    assert.equal(pythonCandidates("linux")[0].command, "python3.13");
    assert.deepEqual(pythonCandidates("win32")[0], { command: "py", args: ["-3"] });
  });

  it("installs from a checkout or a wheel into a private environment", () => {
    assert.deepEqual(venvLayout("/s/venv", "linux"), { python: "/s/venv/bin/python", server: "/s/venv/bin/lsp-complete" });
    assert.equal(venvLayout("C:\\s", "win32").server, "C:\\s\\Scripts\\lsp-complete.exe");
    assert.deepEqual(pipInstallArgs("/src/lsp-complete"), [
      "-m",
      "pip",
      "install",
      "--disable-pip-version-check",
      "/src/lsp-complete[default-model]",
    ]);
    assert.equal(installSourceKind("/src/lsp-complete", true), "checkout");
    assert.equal(installSourceKind("/d/lsp_complete-0.1.0-py3-none-any.whl", false), "wheel");
    assert.equal(installSourceKind("/d/readme.txt", false), undefined);
  });

  it("turns pip's output into progress", () => {
    assert.equal(pipProgressMessage("Building wheel for llama-cpp-python (pyproject.toml): started"), "building llama.cpp (a few minutes)…");
    assert.equal(pipProgressMessage("Collecting numpy>=1.26"), "fetching numpy>=1.26…");
    assert.equal(pipProgressMessage("  Downloading https://x/y/numpy-2.whl (16 MB)"), "fetching numpy-2.whl…");
    assert.equal(pipProgressMessage("Successfully installed lsp-complete-0.1.0"), "installed");
    assert.equal(pipProgressMessage("Requirement already satisfied: x"), undefined);
  });

  it("names the same install command as every README", () => {
    assert.equal(
      INSTALL_HINT,
      "install it from a checkout of lsp-complete: pipx install \".[default-model]\" " +
        "(or pip install \".[default-model]\" in a virtual environment), then run lsp-complete doctor",
    );
  });
});

describe("next edits", () => {
  const uri = "file:///w/area.py";
  const range = { start: { line: 1, character: 12 }, end: { line: 1, character: 16 } };
  const command = { title: "Accept next edit", command: "lsp-complete.accepted", arguments: [{ id: "e1" }] };
  const edit = { text: "", range, textDocument: { uri, version: 7 }, command };

  it("speaks Copilot's method names and our ready notification", () => {
    assert.equal(NEXT_EDIT_METHOD, "textDocument/copilotInlineEdit");
    assert.equal(DID_SHOW_NEXT_EDIT_METHOD, "textDocument/didShowInlineEdit");
    assert.equal(NEXT_EDIT_READY_METHOD, "lsp-complete/nextEditReady");
  });

  it("asks with the document's version, as sidekick.nvim and copilot.el do", () => {
    assert.deepEqual(nextEditParams(uri, 7, { line: 0, character: 10 }), {
      textDocument: { uri, version: 7 },
      position: { line: 0, character: 10 },
      context: { triggerKind: 2 },
    });
  });

  it("shows the first edit, only for this document at this version", () => {
    assert.equal(pickNextEdit({ edits: [edit, { ...edit, text: "x" }] }, uri, 7), edit);
    assert.equal(pickNextEdit({ edits: [edit] }, uri, 8), undefined); // typed since
    assert.equal(pickNextEdit({ edits: [edit] }, "file:///w/other.py", 7), undefined);
    assert.equal(pickNextEdit({ edits: [] }, uri, 7), undefined); // nothing to change
    assert.equal(pickNextEdit(null, uri, 7), undefined);
    assert.equal(pickNextEdit({ edits: [{ ...edit, range: { start: range.start } } as never] }, uri, 7), undefined);
    // An edit without a version is taken to be for the version asked.
    const unversioned = { ...edit, textDocument: { uri } };
    assert.equal(pickNextEdit({ edits: [unversioned] }, uri, 7), unversioned);
  });

  it("asks only when the announced edit is for the document and version shown", () => {
    assert.ok(nextEditReadyWanted({ textDocument: { uri, version: 7 } }, uri, 7));
    assert.ok(!nextEditReadyWanted({ textDocument: { uri, version: 6 } }, uri, 7));
    assert.ok(!nextEditReadyWanted({ textDocument: { uri: "file:///w/b.py", version: 7 } }, uri, 7));
  });

  it("becomes an item over the replaced range whose accept runs the edit's command", () => {
    assert.deepEqual(nextEditItem(edit), {
      insertText: "",
      snippet: false,
      range,
      command: {
        title: "Accept next edit",
        command: ACCEPT_COMMAND_ID,
        arguments: [{ command: "lsp-complete.accepted", arguments: [{ id: "e1" }] }],
      },
    });
    assert.deepEqual(nextEditItem({ ...edit, command: undefined }), { insertText: "", snippet: false, range });
  });
});
