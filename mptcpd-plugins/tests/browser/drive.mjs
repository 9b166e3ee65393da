// A headless Debian Chromium that a test drives line by line (playwright-core).
//
//   node drive.mjs URL
//
// Opens URL, prints {"ok": true} once the page has loaded, then answers each
// line of stdin, a JSON command, with one JSON line:
//   {"eval": "JS expression"}      -> {"ok": true, "value": <its value>}
//   {"screenshot": "/path/x.png"}  -> {"ok": true}
// Errors answer {"ok": false, "error": "..."}; end of stdin closes the browser.
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const url = process.argv[2];
const send = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

// Flags for a closed network and a root user (no sandbox); nothing of
// Chromium's reaches out (background networking, component updates, sync).
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(url, { waitUntil: "load", timeout: 15000 });
  send({ ok: true });
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    try {
      const cmd = JSON.parse(line);
      if ("eval" in cmd) {
        send({ ok: true, value: await page.evaluate(cmd.eval), errors });
      } else if ("screenshot" in cmd) {
        await page.screenshot({ path: cmd.screenshot, fullPage: true });
        send({ ok: true });
      } else {
        send({ ok: false, error: "unknown command" });
      }
    } catch (e) {
      send({ ok: false, error: String(e) });
    }
  }
} finally {
  await browser.close();
}
