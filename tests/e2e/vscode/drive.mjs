// Drives a real VS Code (code-server, already running) in headless Chromium with Playwright,
// as a user would: check the extension waits for a source file, open the file, type, see the
// ghost text, accept it with Tab, save, turn suggestions off and on, snooze and resume from the
// status bar menu, ask with Alt+\\, turn suggestions off and on for Python, cycle through the
// suggestions with Alt+] and Alt+[. It only observes and acts; tests/e2e/test_vscode_e2e.py
// decides what is right. Every wait is bounded; the browser is always closed.
//
// Usage: node drive.mjs CONFIG.json   (writes config.resultPath: JSON observations)

import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const config = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
// playwright-core lives in the setup's cache folder (scripts/e2e-setup.sh), not next to us.
const require = createRequire(path.join(config.nodeModules, "_.js"));
const { chromium } = require("playwright-core");

const result = { steps: [], error: null, failedStep: null, notifications: [] };
const started = Date.now();
const log = (msg) => console.log(`[drive ${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function step(name, fn) {
  const t0 = Date.now();
  log(`${name}...`);
  try {
    const value = await fn();
    result.steps.push({ name, ms: Date.now() - t0 });
    return value;
  } catch (err) {
    result.failedStep = name;
    throw err;
  }
}

/** Polls `fn` until it returns a truthy value; throws with what `seen()` says was there. */
async function until(what, fn, timeoutMs, intervalMs = 100, seen = null) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) {
      const last = seen ? `; last seen: ${JSON.stringify(seen())}` : "";
      throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}${last}`);
    }
    await sleep(intervalMs);
  }
}

const norm = (s) => (s ?? "").replace(/\u00a0/g, " ");

/** What VS Code draws as ghost text: the part on the cursor line and any lines below it. */
async function ghostText(page) {
  return page.evaluate(() => {
    const text = (el) => (el.textContent ?? "").replace(/\u00a0/g, " ");
    const visible = (el) => {
      const r = el.getBoundingClientRect();
      return r.width > 0 && r.height > 0;
    };
    const inline = [...document.querySelectorAll(".monaco-editor .view-lines .ghost-text-decoration")]
      .filter(visible)
      .map(text)
      .join("");
    const below = [...document.querySelectorAll(".monaco-editor .ghost-text .view-line")]
      .filter(visible)
      .map(text);
    return { inline, below, any: inline !== "" || below.some((l) => l !== "") };
  });
}

/** Every status bar item (for the record when something fails). */
async function statusItems(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll(".statusbar-item")].map((e) => ({
      id: e.id,
      text: (e.textContent ?? "").replace(/\u00a0/g, " ").trim(),
    })),
  );
}

/** The extension's status bar item (lspComplete.status): its text and its icons. */
async function statusItem(page) {
  return page.evaluate(() => {
    const items = [...document.querySelectorAll(".statusbar-item")];
    const el = items.find((e) => (e.id ?? "").endsWith("lspComplete.status"));
    if (!el) return null;
    const icons = [...el.querySelectorAll(".codicon")].map((i) =>
      [...i.classList].find((c) => c.startsWith("codicon-") && c !== "codicon-modifier-spin") ?? "",
    );
    return { id: el.id, text: (el.textContent ?? "").replace(/\u00a0/g, " ").trim(), icons };
  });
}

/** Waits until the status bar item passes `test` (given the item); returns the item. */
function statusUntil(page, what, test, timeoutMs = 10_000) {
  return until(
    `the status bar item to ${what}`,
    async () => {
      const s = await statusItem(page);
      return s && test(s) ? s : null;
    },
    timeoutMs,
  );
}

const sparkle = (s) => s.icons.includes("codicon-sparkle");

async function notifications(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll(".notification-toast .notification-list-item-message")].map((e) =>
      (e.textContent ?? "").trim(),
    ),
  );
}

/** Click the extension's status bar item and pick `label` from its menu. */
async function statusMenu(page, label) {
  const s = await statusItem(page);
  if (!s) throw new Error("no lsp-complete status bar item");
  await page.locator(`[id="${s.id}"]`).click();
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 10_000 });
  const row = page.locator(".quick-input-list .monaco-list-row", { hasText: label }).first();
  await row.waitFor({ state: "visible", timeout: 10_000 });
  await row.click();
  await page.locator(".quick-input-widget").waitFor({ state: "hidden", timeout: 10_000 });
  // The extension gives the focus back to the editor, so that typing goes on there.
  await until("the editor to have the focus again after the menu", () => editorFocused(page), 5_000);
}

const editorFocused = (page) => page.evaluate(() => !!document.activeElement?.closest(".monaco-editor"));

/** Whatever the editor asks (a retyped character, the trigger key), watch for ghost text. */
async function ghostWhileQuiet(page) {
  // Keys must reach the editor, or seeing no ghost text proves nothing.
  if (!(await editorFocused(page))) throw new Error("the editor does not have the focus");
  await page.keyboard.press("Escape");
  await page.keyboard.press("Backspace");
  await page.keyboard.type(config.typed.slice(-1), { delay: 60 });
  let seen = { inline: "", below: [], any: false };
  for (let i = 0; i < 12; i++) {
    if (i % 4 === 1) await page.keyboard.press(config.triggerKey);
    await sleep(250);
    const g = await ghostText(page);
    if (g.any) seen = g;
  }
  return seen;
}

/** Ask with the trigger key only (nothing typed) until the wanted ghost text shows. */
async function ghostByTriggerKey(page, wanted) {
  await page.keyboard.press("Escape");
  let lastTrigger = 0;
  let presses = 0;
  return until(
    "ghost text after pressing the trigger key",
    async () => {
      const g = await ghostText(page);
      result.lastGhost = g;
      if (g.any && wanted.includes(g.inline)) return { ...g, presses };
      if (Date.now() - lastTrigger > 2000) {
        await page.keyboard.press(config.triggerKey);
        presses += 1;
        lastTrigger = Date.now();
      }
      return null;
    },
    config.ghostTimeoutMs,
    100,
    () => result.lastGhost,
  );
}

async function runCommand(page, title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 10_000 });
  await input.fill(`>${title}`);
  const row = page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first();
  await row.waitFor({ state: "visible", timeout: 10_000 });
  await page.keyboard.press("Enter");
  await page.locator(".quick-input-widget").waitFor({ state: "hidden", timeout: 10_000 });
}

const readFile = () => fs.readFileSync(config.file, "utf8");

let context;
try {
  context = await step("launch chromium", () =>
    chromium.launchPersistentContext(config.profileDir, {
      executablePath: config.chromium,
      headless: true,
      viewport: { width: 1280, height: 720 },
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    }),
  );
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(30_000);
  page.on("pageerror", (err) => log(`page error: ${String(err).slice(0, 300)}`));

  await step("load the workbench", async () => {
    await page.goto(config.url, { waitUntil: "domcontentloaded" });
    await page.locator(".monaco-workbench").waitFor({ state: "visible", timeout: 60_000 });
  });

  // Activation on the served languages: with no source file open the extension is not
  // running (no status bar item, no server, no model).
  result.statusBeforeOpen = await step("no extension before a source file", async () => {
    await page.locator(".statusbar-item").first().waitFor({ state: "visible" });
    await sleep(config.idleCheckMs);
    return await statusItem(page);
  });

  await step("open the file", async () => {
    await page.keyboard.press("Control+p");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible" });
    await input.fill(config.fileName);
    await page.locator(".quick-input-list .monaco-list-row", { hasText: config.fileName }).first().waitFor();
    await page.keyboard.press("Enter");
    await page.locator(".tab.active", { hasText: config.fileName }).waitFor();
    await page.locator(".monaco-editor .view-lines").first().waitFor();
    await sleep(300);
  });

  // onLanguage:python: the extension starts the server and the model loads; the status bar
  // shows $(sparkle) once lsp-complete/status says "ready".
  result.statusReady = await step("status bar: model ready", () => {
    let errorSince = null;
    return until(
      "the lsp-complete status bar item to show the model ready",
      async () => {
        const s = await statusItem(page);
        result.lastStatus = s;
        // $(error): the server is not running or the model failed. Give a restart a moment.
        if (s && s.icons.includes("codicon-error")) {
          errorSince ??= Date.now();
          if (Date.now() - errorSince > 8000) {
            throw new Error(`the status bar item shows an error: ${JSON.stringify(s)}`);
          }
        } else {
          errorSince = null;
        }
        return s && s.icons.includes("codicon-sparkle") ? s : null;
      },
      config.readyTimeoutMs,
      250,
      () => result.lastStatus,
    );
  });
  result.statusTooltip = await step("status bar tooltip", async () => {
    await page.locator(`[id="${result.statusReady.id}"]`).hover();
    const hover = page.locator(".workbench-hover, .monaco-hover").filter({ hasText: "lsp-complete" }).first();
    await hover.waitFor({ state: "visible", timeout: 10_000 });
    const text = norm(await hover.textContent());
    await page.mouse.move(640, 300);
    await page.keyboard.press("Escape");
    return text;
  });

  await step("go to the line and open a new one", async () => {
    await page.keyboard.press("Control+g");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible" });
    await input.fill(`:${config.gotoLine}`);
    await sleep(200);
    await page.keyboard.press("Enter");
    await page.locator(".quick-input-widget").waitFor({ state: "hidden" });
    await page.keyboard.press("End");
    await page.keyboard.press("Enter");
    // The cursor rests a moment on the new line, as before typing: the extension tells the
    // server (lsp-complete/didMoveCursor), VS Code asks there, and after that answer the
    // server prepares the full-context prompt there.
    await page.waitForTimeout(1000);
  });

  await step("type", () => page.keyboard.type(config.typed, { delay: 60 }));

  // The ghost text must carry one of the texts the server gives for this document and position.
  const wanted = config.expectedGhost.map((t) => t.split("\n")[0]);
  result.ghost = await step("ghost text", async () => {
    let lastTrigger = Date.now();
    return until(
      `ghost text with the server's suggestion (one of ${JSON.stringify(wanted)})`,
      async () => {
        const g = await ghostText(page);
        result.lastGhost = g;
        if (g.any && wanted.includes(g.inline)) return g;
        // VS Code asks by itself as you type; if nothing shows, ask explicitly now and then.
        if (!g.any && Date.now() - lastTrigger > 3000) {
          await page.keyboard.press(config.triggerKey);
          lastTrigger = Date.now();
        }
        return null;
      },
      config.ghostTimeoutMs,
      100,
      () => result.lastGhost,
    );
  });
  result.notifications.push(...(await notifications(page)));

  await step("screenshot", async () => {
    await sleep(300); // let the status bar show the latency of this suggestion
    await page.screenshot({ path: config.screenshot });
    const ghost = page.locator(".monaco-editor .ghost-text-decoration").first();
    const box = await ghost.boundingBox();
    const editor = await page.locator(".monaco-editor").first().boundingBox();
    if (box && editor) {
      // The editor from a few lines above the ghost text down to the status bar (the one in
      // editors/vscode/media/ghost-text.png).
      const view = page.viewportSize();
      const line = await ghost
        .locator("xpath=ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' view-line ')]")
        .boundingBox();
      const top = Math.max(editor.y, line ? line.y - 3 * line.height : box.y - 60);
      await page.screenshot({
        path: config.screenshotEditor,
        clip: { x: editor.x, y: top, width: view.width - editor.x, height: view.height - top },
      });
    }
    result.statusWithGhost = await statusItem(page);
  });

  await step("Tab accepts, save", async () => {
    const before = readFile();
    await page.keyboard.press("Tab");
    await sleep(300);
    await page.keyboard.press("Control+s");
    result.savedAfterAccept = await until(
      "the file to be saved",
      () => {
        const now = readFile();
        return now !== before ? now : null;
      },
      15_000,
    );
  });

  await step("undo the acceptance, save", async () => {
    await page.keyboard.press("Control+z");
    await page.keyboard.press("Control+s");
    result.savedAfterUndo = await until(
      "the file to be saved after undo",
      () => {
        const now = readFile();
        return now !== result.savedAfterAccept ? now : null;
      },
      15_000,
    );
  });

  await step("toggle off", async () => {
    await page.keyboard.press("Escape");
    await runCommand(page, "lsp-complete: Toggle inline completions");
    result.statusOff = await statusUntil(page, "say off", (s) => s.text.endsWith(": off"));
  });

  // Off: whatever the editor asks, no ghost text. Backspace and retype the last character
  // (automatic requests), then ask explicitly, and watch for a few seconds.
  result.ghostWhileOff = await step("no ghost text while off", () => ghostWhileQuiet(page));

  await step("toggle on: ghost text again", async () => {
    await runCommand(page, "lsp-complete: Toggle inline completions");
    result.statusOnAgain = await statusUntil(page, "show the model ready again", sparkle);
    result.ghostOnAgain = await ghostByTriggerKey(page, wanted);
  });

  // Snooze from the status bar menu: no ghost text, whatever the editor asks.
  await step("snooze for 5 minutes", async () => {
    await page.keyboard.press("Escape");
    await statusMenu(page, "Snooze for 5 minutes");
    result.statusSnoozed = await statusUntil(page, "say snoozed", (s) =>
      s.text.startsWith("lsp-complete: snoozed"),
    );
  });
  result.ghostWhileSnoozed = await step("no ghost text while snoozed", () => ghostWhileQuiet(page));

  // Resume, then Alt+\ alone (nothing typed): the extension's own keybinding asks.
  await step("resume", async () => {
    await statusMenu(page, "Resume now");
    result.statusResumed = await statusUntil(page, "show the model ready after resuming", sparkle);
  });
  result.ghostByKey = await step("the trigger key asks", () => ghostByTriggerKey(page, wanted));

  // Per-language switch from the status bar menu.
  await step("turn off for python", async () => {
    await page.keyboard.press("Escape");
    await statusMenu(page, "Turn off for python");
    result.statusLanguageOff = await statusUntil(page, "say off for python", (s) =>
      s.text === "lsp-complete: off for python",
    );
    result.settingsLanguageOff = fs.readFileSync(config.userSettings, "utf8");
  });
  result.ghostWhileLanguageOff = await step("no ghost text while off for python", () => ghostWhileQuiet(page));
  await step("turn on for python", async () => {
    await statusMenu(page, "Turn on for python");
    result.statusLanguageOn = await statusUntil(page, "show the model ready for python again", sparkle);
  });
  result.ghostLanguageOn = await step("ghost text for python again", () => ghostByTriggerKey(page, wanted));

  // Cycling: on another new line, where the model has alternatives, Alt+] (VS Code's "Show
  // next inline suggestion") asks explicitly and shows the next of the server's suggestions;
  // Alt+[ goes back to the first.
  const whole = (g) => [g.inline, ...g.below].join("\n");
  await step("type on a new line to cycle", async () => {
    await page.keyboard.press("Escape");
    await page.keyboard.press("End");
    await page.keyboard.press("Enter");
    await page.waitForTimeout(1000);
    await page.keyboard.type(config.cycleTyped, { delay: 60 });
  });
  result.cycleFirst = await step("ghost text to cycle from", async () => {
    let lastTrigger = Date.now();
    let since = Date.now();
    let previous = null;
    return until(
      "steady ghost text on the new line",
      async () => {
        const g = await ghostText(page);
        result.lastGhost = g;
        if (!g.any) {
          if (Date.now() - lastTrigger > 3000) {
            await page.keyboard.press(config.triggerKey);
            lastTrigger = Date.now();
          }
          previous = null;
          return null;
        }
        if (previous === null || whole(g) !== whole(previous)) {
          previous = g;
          since = Date.now();
        }
        return Date.now() - since > 1000 ? g : null; // the same for a second: what is shown
      },
      config.ghostTimeoutMs,
      100,
      () => result.lastGhost,
    );
  });
  result.cycleNext = await step("Alt+] shows the next suggestion", async () => {
    await page.keyboard.press(config.nextKey);
    const g = await until(
      "another ghost text after Alt+]",
      async () => {
        const g = await ghostText(page);
        result.lastGhost = g;
        return g.any && whole(g) !== whole(result.cycleFirst) ? g : null;
      },
      config.ghostTimeoutMs,
      100,
      () => result.lastGhost,
    );
    await page.screenshot({ path: config.cycleShot });
    return g;
  });
  result.cyclePrevious = await step("Alt+[ shows the first again", async () => {
    await page.keyboard.press(config.previousKey);
    return until(
      "the first ghost text after Alt+[",
      async () => {
        const g = await ghostText(page);
        result.lastGhost = g;
        return g.any && whole(g) === whole(result.cycleFirst) ? g : null;
      },
      10_000,
      100,
      () => result.lastGhost,
    );
  });
  result.notifications.push(...(await notifications(page)));
} catch (err) {
  result.error = String(err?.stack ?? err);
  log(`FAILED in "${result.failedStep}": ${String(err).slice(0, 500)}`);
  try {
    const page = context?.pages()[0];
    if (page) {
      result.notifications.push(...(await notifications(page)));
      result.statusItems = await statusItems(page);
      await page.screenshot({ path: config.failureShot });
    }
  } catch {
    // best effort
  }
} finally {
  result.totalMs = Date.now() - started;
  fs.writeFileSync(config.resultPath, JSON.stringify(result, null, 2));
  if (context) await context.close().catch(() => {});
  log("done");
}
