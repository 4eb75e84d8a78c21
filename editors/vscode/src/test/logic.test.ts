// Unit tests of the extension's pure logic; run with `npm test` (node's built-in test runner),
// no VS Code instance needed.
import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import {
  ACCEPT_COMMAND_ID,
  CURSOR_METHOD,
  INIT_OPTION_KEYS,
  configChangeAction,
  convertItem,
  convertResult,
  cursorMoveParams,
  executeCommandParams,
  formatLatency,
  formatStatus,
  formatStatusDetails,
  isLanguageEnabled,
  lastLatencyMs,
  serverCommand,
  toInitializationOptions,
  toLspTriggerKind,
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
    });
    assert.deepEqual(Object.keys(opts).sort(), [...INIT_OPTION_KEYS].sort());
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
    assert.deepEqual(pkg.activationEvents, ["onStartupFinished"]);
    assert.match(pkg.engines.vscode, /^\^1\.9\d/);
  });

  it("contributes the commands and settings", () => {
    const commands = pkg.contributes.commands.map((c: { command: string }) => c.command);
    for (const c of ["lspComplete.toggle", "lspComplete.showStatus"]) assert.ok(commands.includes(c), c);
    const props = pkg.contributes.configuration.properties;
    for (const key of [
      "serverPath",
      "model",
      "threads",
      "maxTokens",
      "multiline",
      "enabled",
      "debounceMs",
    ]) {
      assert.ok(`lspComplete.${key}` in props, key);
    }
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
