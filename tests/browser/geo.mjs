// The browser half of Marquee's geo targeting test (crates/marquee/tests/browser.rs runs it).
//
//   node tests/browser/geo.mjs <page-url> --edge <edge-base-url> --out <dir>
//        --visit <address> [--visit <address> ...] [--timeout-ms <n>]
//
// Drives Debian's Chromium (/usr/bin/chromium, or $CHROMIUM) headless through playwright-core,
// with the flags of intercept.mjs. For each address, one visit in a fresh browser context (a fresh
// profile, closed before the next visit): it loads the publisher page, waits for the async tag
// to settle every <ins class="marquee"> slot (filled or empty), reads each filled slot's ad
// document and waits for its impression beacon to be answered. One browser serves every visit.
//
// Every request of the browser passes through the interceptor of intercept.mjs, shared with
// e2e.mjs. For each visit it adds `X-Forwarded-For: <address>` to every request for the edge,
// as a proxy in front of the edge would: below the page, so that the browser does not take the
// header for the page's own and ask the edge a CORS preflight first, as it does for a header
// set with Playwright's `extraHTTPHeaders` while the interceptor is on. Requests to other
// hosts never leave the browser (the test's creatives need none; the Rust test fails on any).
//
// Prints one JSON object on stdout, `{ visits: [...], elapsed_ms }`, what the Rust test
// asserts on; each visit holds its address, the /ad.json answers, the slots and the beacons.
// Exits 0 when every visit could be driven to the end; otherwise prints the same object with
// "error" set (and everything seen so far) and exits 1. Writes a screenshot of each visit's
// page to <out>/geo-<n>.png (<out>/geo-failure.png on a failure).
import path from 'node:path';
import { Network, launch, readArgs, run, slotOf, waitForSlots } from './intercept.mjs';


function parseArgs(argv) {
  const args = { page: null, edge: null, out: null, visits: [], timeoutMs: 20000 };
  const visit = (flag, value) => {
    if (flag !== '--visit') return false;
    args.visits.push(value());
    return true;
  };
  const page = (word) => {
    if (args.page !== null) return false;
    args.page = word;
    return true;
  };
  readArgs(argv, args, visit, page);
  if (!args.page || !args.edge || !args.out || args.visits.length === 0) {
    throw new Error(
      'usage: geo.mjs <page-url> --edge <edge-base-url> --out <dir> --visit ADDRESS... [--timeout-ms N]');
  }
  return args;
}

/** One visit of the page from `address`, in a fresh context of `browser`; fills `visit`. */
async function drive(browser, network, args, address, n, visit, left) {
  network.visit(args.edge, address);
  const context = await browser.newContext({ viewport: { width: 1000, height: 700 } });
  let page = null;
  try {
    page = await context.newPage();
    page.on('console', (m) => visit.console.push(`${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => visit.page_errors.push(String(e)));

    await page.goto(args.page, { waitUntil: 'load', timeout: left() });
    await waitForSlots(page, left);

    // What the tag asked the edge and what it answered.
    visit.ad_json.push(...network.adJson(args.edge));

    for (const handle of await page.locator('ins.marquee').elementHandles()) {
      const slot = await slotOf(handle);
      visit.slots.push(slot);
      const frameHandle = await handle.$('iframe');
      if (!frameHandle) continue;
      const frame = await frameHandle.contentFrame();
      if (!frame) throw new Error(`placement ${slot.placement}: no document in the ad iframe`);
      await frame.waitForLoadState('load', { timeout: left() });
      slot.ad = await frame.evaluate(() => ({
        text: document.body ? document.body.innerText.trim() : '',
        images: [...document.querySelectorAll('img')].map((img) => img.src),
      }));
    }

    // Each filled slot's impression beacon, answered: the impression is logged before the
    // visit ends.
    const beacons = visit.slots
      .filter((s) => s.state === 'filled')
      .map((s) => {
        const src = (s.ad?.images ?? []).find((u) => u.startsWith(`${args.edge}/t/i?t=`));
        if (!src) throw new Error(`placement ${s.placement}: the ad has no impression beacon`);
        return src;
      });
    const deadline = Date.now() + left();
    while (!beacons.every((u) => network.log.some((e) => e.url === u && e.responded))) {
      if (Date.now() > deadline) throw new Error('timed out waiting for the impression beacons');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }

    visit.screenshot = path.join(args.out, `geo-${n}.png`);
    await page.screenshot({ path: visit.screenshot, fullPage: true, timeout: left() });
  } catch (error) {
    if (page) {
      const shot = path.join(args.out, 'geo-failure.png');
      const taken = await page.screenshot({ path: shot, fullPage: true, timeout: 3000 })
        .then(() => true, () => false);
      if (taken) visit.screenshot = shot;
    }
    throw error;
  } finally {
    visit.beacons = network.log
      .filter((e) => e.url.startsWith(`${args.edge}/t/i?`))
      .map(({ url, status }) => ({ url, status }));
    visit.requests = network.log
      .map(({ url, method, action, status }) => ({ url, method, action, status }));
    await context.close().catch(() => {});
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const left = () => Math.max(1, args.timeoutMs - (Date.now() - started));
  const result = { page: args.page, edge: args.edge, visits: [] };
  const browser = await launch();
  let network;
  try {
    network = await Network.on(browser);
    for (const [n, address] of args.visits.entries()) {
      const visit = {
        address, ad_json: [], slots: [], beacons: [], requests: [], console: [], page_errors: [],
      };
      result.visits.push(visit);
      await drive(browser, network, args, address, n, visit, left);
    }
  } catch (error) {
    result.error = String(error && error.message ? error.message : error).replace(/\u001b\[[0-9;]*m/g, '');
    process.exitCode = 1;
  } finally {
    if (network?.errors.length) result.interceptor_errors = network.errors;
    result.elapsed_ms = Date.now() - started;
    process.stdout.write(`${JSON.stringify(result)}\n`);
    await browser.close().catch(() => {});
  }
}

run(main);
