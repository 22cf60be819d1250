// The browser half of Marquee's Prebid.js test (crates/marquee/tests/it/browser.rs runs it).
//
//   node tests/browser/prebid.mjs --edge <edge-base-url> --out <dir> [--timeout-ms <n>]
//        <page-url> <expected-text> [<page-url> <expected-text> ...]
//
// Drives Debian's Chromium (/usr/bin/chromium, or $CHROMIUM) headless through playwright-core,
// every request through the interceptor of intercept.mjs (loopback only; nothing leaves the
// machine). Each page (tests/browser/prebid-page.html, served by the test) runs a Prebid.js
// auction and hands its targeting to Marquee's async tag; the visit waits until the slot is
// filled and some frame of the page (the ad's sandboxed iframe, where the Prebid creative
// writes the bid's ad) shows <expected-text>, then records the slot,
// the key-values the page set on it, the /ad.json exchanges and the text of every frame.
//
// Prints one JSON object on stdout: { visits: [...], network: [...] }, with "error" set when a
// visit could not be driven to the end (exit status 1). Screenshots: <out>/prebid-N.png, or
// <out>/prebid-failure.png.
import path from 'node:path';
import { Network, launch, readArgs, waitForSlots } from './intercept.mjs';

function parseArgs(argv) {
  const args = { edge: null, out: null, timeoutMs: 20000, visits: [] };
  const rest = [];
  const word = (text) => {
    rest.push(text);
    return true;
  };
  readArgs(argv, args, () => false, word);
  for (let i = 0; i + 1 < rest.length; i += 2) args.visits.push({ url: rest[i], expect: rest[i + 1] });
  if (!args.edge || !args.out || !args.visits.length || rest.length % 2) {
    throw new Error('usage: prebid.mjs --edge <url> --out <dir> <page-url> <expected-text> ...');
  }
  return args;
}

/** The text of every frame of `page` that has a body, with the frame's URL. */
async function frameTexts(page) {
  const texts = [];
  for (const frame of page.frames()) {
    const text = await frame
      .evaluate(() => (document.body ? document.body.innerText.trim() : ''))
      .catch(() => null);
    if (text !== null) texts.push({ url: frame.url(), text });
  }
  return texts;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const left = () => Math.max(1, args.timeoutMs - (Date.now() - started));
  const result = { edge: args.edge, visits: [], network: [] };
  const browser = await launch();
  let page;
  let network;
  try {
    network = await Network.on(browser);
    for (const [n, { url, expect }] of args.visits.entries()) {
      network.visit(args.edge, null);
      const visit = { url, expect, console: [], page_errors: [] };
      result.visits.push(visit);
      const context = await browser.newContext({ viewport: { width: 800, height: 400 } });
      page = await context.newPage();
      page.on('console', (m) => visit.console.push(`${m.type()}: ${m.text()}`));
      page.on('pageerror', (e) => visit.page_errors.push(String(e)));
      await page.goto(url, { waitUntil: 'load', timeout: left() });
      await waitForSlots(page, left);
      visit.slot = await page.locator('ins.marquee').first().evaluate((s) => ({
        placement: Number(s.getAttribute('data-placement')),
        state: s.getAttribute('data-marquee'),
        key_values: Object.fromEntries([...s.attributes]
          .filter((a) => a.name.startsWith('data-kv-'))
          .map((a) => [a.name.slice(8), a.value])),
        sandbox: s.querySelector('iframe')?.getAttribute('sandbox') ?? null,
      }));
      const deadline = Date.now() + left();
      for (;;) {
        visit.frames = await frameTexts(page);
        if (visit.frames.some((f) => f.text.includes(expect))) break;
        if (Date.now() > deadline) {
          visit.ad_json = network.adJson(args.edge);
          throw new Error(`visit ${n + 1}: no frame shows ${JSON.stringify(expect)}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      visit.ad_json = network.adJson(args.edge);
      visit.screenshot = path.join(args.out, `prebid-${n + 1}.png`);
      await page.screenshot({ path: visit.screenshot, timeout: left() });
      result.network.push(...network.summary());
      await context.close();
      page = null;
    }
  } catch (error) {
    result.error = String(error && error.stack ? error.stack : error);
    if (network) result.network.push(...network.summary());
    if (page) {
      await page
        .screenshot({ path: path.join(args.out, 'prebid-failure.png'), timeout: 5000 })
        .catch(() => {});
    }
  } finally {
    await browser.close().catch(() => {});
  }
  console.log(JSON.stringify(result));
  process.exit(result.error ? 1 : 0);
}

main().catch((error) => {
  console.log(JSON.stringify({ error: String(error && error.stack ? error.stack : error) }));
  process.exit(1);
});
