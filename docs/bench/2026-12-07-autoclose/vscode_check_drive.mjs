import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
const config = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const require = createRequire(path.join(config.nodeModules, "_.js"));
const { chromium } = require("playwright-core");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = {};
async function ghostText(page) {
  return page.evaluate((match) => {
    const text = (el) => (el.textContent ?? "").replace(/\u00a0/g, " ");
    const parts = [...document.querySelectorAll(".monaco-editor .view-lines .ghost-text-decoration")].map(text);
    const line = [...document.querySelectorAll(".monaco-editor .view-line")].map(text).filter((t) => t.includes(match));
    return { parts, line };
  }, config.lineMatch ?? "foo(");
}
const context = await chromium.launchPersistentContext(config.profileDir, {
  executablePath: config.chromium, headless: true, viewport: { width: 1280, height: 720 },
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"] });
try {
  const page = context.pages()[0] ?? (await context.newPage());
  await page.goto(config.url, { waitUntil: "domcontentloaded" });
  await page.locator(".monaco-workbench").waitFor({ state: "visible", timeout: 60000 });
  await sleep(2000);
  await page.keyboard.press("Control+p");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible" });
  await input.fill(config.fileName);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: config.fileName }).first().waitFor();
  await page.keyboard.press("Enter");
  await page.locator(".monaco-editor .view-lines").first().waitFor();
  await sleep(8000); // the server starts, the model loads
  await page.keyboard.press("Control+End");
  await page.keyboard.type(config.typed, { delay: 120 });
  let g = null;
  for (let i = 0; i < 100; i++) {
    g = await ghostText(page);
    if (g.parts.length && g.parts.join("") !== "") break;
    if (i % 20 === 19) await page.keyboard.press("Alt+Backslash");
    await sleep(200);
  }
  out.ghost = g;
  await page.screenshot({ path: config.shot });
  await page.keyboard.press("Tab");
  await sleep(500);
  if (config.afterTab) { // keys typed after Tab, each closing any ghost text first
    out.afterTab = await ghostText(page);
    for (const step of config.afterTab) {
      await page.keyboard.press("Escape");
      if (step.press) await page.keyboard.press(step.press);
      else await page.keyboard.type(step.type, { delay: 120 });
    }
    await page.keyboard.press("Escape");
    await sleep(500);
    await page.screenshot({ path: config.shot.replace(".png", "-end.png") });
  }
  await page.keyboard.press("Control+s");
  await sleep(1000);
  out.saved = fs.readFileSync(config.file, "utf8");
} catch (e) { out.error = String(e); }
fs.writeFileSync(config.result, JSON.stringify(out, null, 1));
await context.close();
