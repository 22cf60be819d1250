// The browser half of Marquee's end-to-end test (crates/marquee/tests/browser.rs runs it).
//
//   node tests/browser/e2e.mjs <page-url> --edge <edge-base-url> --out <dir>
//        [--click <placement-id>] [--timeout-ms <n>]
//
// Drives Debian's Chromium (/usr/bin/chromium, or $CHROMIUM) headless through playwright-core:
// loads the publisher page, waits for the async tag to fill every <ins class="marquee"> slot,
// inspects each ad's sandboxed iframe, waits for the impression beacons, fires one beacon
// again, then clicks one ad twice (each click opens a new page) and follows the click
// redirect up to the landing page.
//
// Every request of the browser, in every page, frame and popup, passes through one
// interceptor on the browser target (CDP `Fetch`; Playwright's own `route` is not used: it
// lets redirect hops through unseen, and the landing request comes after the click redirect's
// 302). Loopback requests go through and their responses (status, Location) are recorded;
// anything else never leaves the browser: images are answered with a stand-in picture (the
// demo's creative images live on unreachable CDN hosts), every other request — the landing
// page — is aborted and recorded.
//
// Prints one JSON object on stdout, what the Rust test asserts on. Exits 0 when the page could
// be driven to the end; otherwise prints the same object with "error" set (and everything seen
// so far) and exits 1. Writes a screenshot of the page to <out>/page.png (<out>/failure.png on
// a failure). The browser profile is Playwright's fresh temporary one, removed on close.
import path from 'node:path';
import { Network, launch, readArgs, run, slotOf, waitForSlots } from './intercept.mjs';


function parseArgs(argv) {
  const args = { page: null, edge: null, out: null, click: null, timeoutMs: 20000 };
  const click = (flag, value) => {
    if (flag !== '--click') return false;
    args.click = Number(value());
    return true;
  };
  const page = (word) => {
    if (args.page !== null) return false;
    args.page = word;
    return true;
  };
  readArgs(argv, args, click, page);
  if (!args.page || !args.edge || !args.out) {
    throw new Error(
      'usage: e2e.mjs <page-url> --edge <edge-base-url> --out <dir> [--click ID] [--timeout-ms N]');
  }
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const left = () => Math.max(1, args.timeoutMs - (Date.now() - started));
  const waitFor = async (what, predicate) => {
    const deadline = Date.now() + left();
    for (;;) {
      const value = await predicate();
      if (value) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  };
  const result = {
    page: args.page,
    edge: args.edge,
    ad_json: [], // each /ad.json exchange: { url, status, headers, body }
    slots: [],
    beacons: [], // each /t/i request: { url, status }
    repeat_impression: null,
    clicks: [],
    network: [],
    console: [],
    page_errors: [],
    screenshot: null,
  };

  const browser = await launch();
  let page;
  let network;
  try {
    network = await Network.on(browser);
    const context = await browser.newContext({ viewport: { width: 1000, height: 520 } });
    page = await context.newPage();
    page.on('console', (m) => result.console.push(`${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => result.page_errors.push(String(e)));

    await page.goto(args.page, { waitUntil: 'load', timeout: left() });

    // The async tag: every slot ends filled (or empty / error, which fails below).
    await waitForSlots(page, left);

    // What the tag asked the edge and what it answered.
    result.ad_json.push(...network.adJson(args.edge));

    for (const handle of await page.locator('ins.marquee').elementHandles()) {
      const slot = await slotOf(handle);
      result.slots.push(slot);
      const frameHandle = await handle.$('iframe');
      if (!frameHandle) continue;
      slot.iframe = await frameHandle.evaluate((f) => ({
        sandbox: f.getAttribute('sandbox'),
        has_srcdoc: f.hasAttribute('srcdoc'),
        width: Number(f.width),
        height: Number(f.height),
      }));
      const frame = await frameHandle.contentFrame();
      if (!frame) throw new Error(`placement ${slot.placement}: no document in the ad iframe`);
      await frame.waitForLoadState('load', { timeout: left() });
      slot.ad = await frame.evaluate(() => ({
        origin: window.origin,
        url: location.href,
        links: [...document.querySelectorAll('a[href]')].map((a) => ({
          href: a.href,
          target: a.target,
          text: a.textContent.trim(),
        })),
        images: [...document.querySelectorAll('img')].map((img) => ({
          src: img.src,
          width: img.width,
          height: img.height,
          loaded: img.complete && img.naturalWidth > 0,
        })),
        text: document.body ? document.body.innerText.trim() : '',
      }));
    }
    const unfilled = result.slots.filter((s) => s.state !== 'filled');
    if (unfilled.length) {
      let why = '';
      const pageOrigin = new URL(args.page).origin;
      const refused = result.ad_json.find((e) =>
        e.headers['access-control-allow-origin'] !== pageOrigin);
      if (refused) {
        why = `; the /ad.json answer (status ${refused.status}) has no ` +
          `Access-Control-Allow-Origin: ${pageOrigin} (it has ` +
          `${JSON.stringify(refused.headers['access-control-allow-origin'] ?? null)}), so the ` +
          'browser keeps it from tag.js, a script of another origin (CORS)';
      }
      throw new Error(`slot(s) not filled: ${unfilled
        .map((s) => `placement ${s.placement} data-marquee="${s.state}"`).join(', ')}${why}`);
    }

    // The impression beacons: each ad's own <img>, answered and loaded.
    const beaconUrls = result.slots.map((s) => {
      const img = (s.ad?.images ?? []).find((i) => i.src.startsWith(`${args.edge}/t/i?t=`));
      if (!img) throw new Error(`placement ${s.placement}: the ad has no impression beacon <img>`);
      return img.src;
    });
    await waitFor('the impression beacons to be answered', () =>
      beaconUrls.every((u) => network.log.some((e) => e.url === u && e.responded)));

    result.screenshot = path.join(args.out, 'page.png');
    await page.screenshot({ path: result.screenshot, fullPage: true, timeout: left() });

    // One beacon again, as a page retrying it would: answered the same, counted once.
    const repeatUrl = beaconUrls[0];
    const repeatWidth = await page.evaluate((u) => new Promise((resolve, reject) => {
      const img = new Image();
      img.onload = () => resolve(img.naturalWidth);
      img.onerror = () => reject(new Error(`the repeated beacon ${u} did not load`));
      img.src = u;
    }), repeatUrl);
    result.repeat_impression = { url: repeatUrl, natural_width: repeatWidth };
    await waitFor('the repeated beacon to be answered', () =>
      network.log.filter((e) => e.url === repeatUrl && e.responded).length >= 2);
    result.beacons = network.log
      .filter((e) => e.url.startsWith(`${args.edge}/t/i?`))
      .map((e) => ({ url: e.url, status: e.status }));

    // Click one ad twice. Each click opens a new page, which requests the click URL; the edge
    // answers 302 to the landing URL, whose request the interceptor aborts.
    const slot = args.click === null
      ? result.slots[0]
      : result.slots.find((s) => s.placement === args.click);
    if (!slot) throw new Error(`no slot for placement ${args.click} to click`);
    const link = slot.ad.links.find((l) => l.href.startsWith(`${args.edge}/t/c?t=`));
    if (!link) throw new Error(`placement ${slot.placement}: the ad has no ${args.edge}/t/c link`);
    const anchor = page
      .frameLocator(`ins.marquee[data-placement="${slot.placement}"] iframe`)
      .locator(`a[href="${link.href}"]`)
      .first();
    const claimed = new Set();
    for (let n = 1; n <= 2; n++) {
      const opened = context.waitForEvent('page', { timeout: left() });
      await anchor.click({ timeout: left() });
      const popup = await opened;
      const hop = await waitFor(`click ${n}: the answer to ${link.href}`, () =>
        network.log.find((e) => e.url === link.href && e.responded && !claimed.has(e.id)));
      claimed.add(hop.id);
      const next = hop.location
        ? await waitFor(`click ${n}: the request after the redirect`, () =>
          network.log.find((e) => e.redirected_from === hop.id))
        : null;
      result.clicks.push({
        placement: slot.placement,
        click_url: hop.url,
        type: hop.type,
        status: hop.status,
        location: hop.location,
        next_url: next?.url ?? null,
        next_action: next?.action ?? null,
        popup: popup !== page,
      });
      await popup.close();
    }
  } catch (error) {
    result.error = String(error && error.message ? error.message : error).replace(/\u001b\[[0-9;]*m/g, '');
    if (page) {
      const shot = path.join(args.out, 'failure.png');
      const taken = await page.screenshot({ path: shot, fullPage: true, timeout: 3000 })
        .then(() => true, () => false);
      if (taken) result.screenshot = shot;
    }
    process.exitCode = 1;
  } finally {
    if (network) {
      result.network = network.summary();
      if (network.errors.length) result.interceptor_errors = network.errors;
    }
    result.elapsed_ms = Date.now() - started;
    process.stdout.write(`${JSON.stringify(result)}\n`);
    await browser.close().catch(() => {});
  }
}

run(main);
