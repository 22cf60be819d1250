// The browser half of Marquee's geo targeting test (crates/marquee/tests/browser.rs runs it).
//
//   node tests/browser/geo.mjs <page-url> --edge <edge-base-url> --out <dir>
//        --visit <address> [--visit <address> ...] [--timeout-ms <n>]
//
// Drives Debian's Chromium (/usr/bin/chromium, or $CHROMIUM) headless through playwright-core,
// with the flags of e2e.mjs. For each address, one visit in a fresh browser context (a fresh
// profile, closed before the next visit): it loads the publisher page, waits for the async tag
// to settle every <ins class="marquee"> slot (filled or empty), reads each filled slot's ad
// document and waits for its impression beacon to be answered. One browser serves every visit.
//
// Every request of the browser passes through one interceptor on the browser target (CDP
// `Fetch`, as in e2e.mjs: Playwright's own events and `route` do not see the requests of the
// ads' sandboxed srcdoc iframes, the impression beacons). It adds `X-Forwarded-For: <address>`
// to every request for the edge, as a proxy in front of the edge would: below the page, so
// that the browser does not take the header for the page's own and ask the edge a CORS
// preflight first, as it does for a header set with Playwright's `extraHTTPHeaders` while
// this interceptor is on. Loopback requests go through and their answers are recorded;
// requests to other hosts never leave the browser: they are aborted and recorded (the test's
// creatives need none).
//
// Prints one JSON object on stdout, `{ visits: [...], elapsed_ms }`, what the Rust test
// asserts on; each visit holds its address, the /ad.json answers, the slots and the beacons.
// Exits 0 when every visit could be driven to the end; otherwise prints the same object with
// "error" set (and everything seen so far) and exits 1. Writes a screenshot of each visit's
// page to <out>/geo-<n>.png (<out>/geo-failure.png on a failure).
import path from 'node:path';
import { chromium } from 'playwright-core';

// As in e2e.mjs: no sandbox as root, no GPU, and no background traffic to Google's services.
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

function parseArgs(argv) {
  const args = { page: null, edge: null, out: null, visits: [], timeoutMs: 20000 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--edge') args.edge = value().replace(/\/+$/, '');
    else if (a === '--out') args.out = value();
    else if (a === '--visit') args.visits.push(value());
    else if (a === '--timeout-ms') args.timeoutMs = Number(value());
    else if (!a.startsWith('--') && args.page === null) args.page = a;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!args.page || !args.edge || !args.out || args.visits.length === 0) {
    throw new Error(
      'usage: geo.mjs <page-url> --edge <edge-base-url> --out <dir> --visit ADDRESS... [--timeout-ms N]');
  }
  return args;
}

const isLoopback = (host) => ['127.0.0.1', 'localhost', '[::1]'].includes(host);

/**
 * Intercepts every request of the browser (all targets) and keeps a log of the current visit:
 * one entry per request, `{ id, url, method, action, status, responded, body }` (the body of
 * /ad.json answers only).
 */
class Network {
  constructor(cdp) {
    this.cdp = cdp;
    this.log = [];
    this.errors = [];
    this.byId = new Map();
  }

  async start() {
    this.cdp.on('Fetch.requestPaused', (event) => {
      this.paused(event).catch((error) => {
        this.errors.push(`${event.request.url}: ${error.message}`);
        this.cdp.send('Fetch.continueRequest', { requestId: event.requestId }).catch(() => {});
      });
    });
    await this.cdp.send('Fetch.enable', {
      patterns: [
        { urlPattern: '*', requestStage: 'Request' },
        { urlPattern: 'http://127.0.0.1:*', requestStage: 'Response' },
        { urlPattern: 'http://localhost:*', requestStage: 'Response' },
      ],
    });
  }

  /** Starts the log of a new visit, whose requests for `edge` come from `address`. */
  visit(edge, address) {
    this.log = [];
    this.byId = new Map();
    this.edge = edge;
    this.forwardedFor = address;
  }

  async paused(event) {
    const id = event.requestId;
    if (event.responseStatusCode !== undefined || event.responseErrorReason !== undefined) {
      const entry = this.byId.get(id) ?? { id, url: event.request.url };
      entry.status = event.responseStatusCode ?? null;
      entry.failure = event.responseErrorReason ?? null;
      if (entry.url.includes('/ad.json?') && entry.status === 200) {
        const { body, base64Encoded } = await this.cdp.send('Fetch.getResponseBody', { requestId: id });
        entry.body = base64Encoded ? Buffer.from(body, 'base64').toString() : body;
      }
      entry.responded = true;
      await this.cdp.send('Fetch.continueRequest', { requestId: id });
      return;
    }
    const url = new URL(event.request.url);
    const entry = {
      id, url: event.request.url, method: event.request.method, action: 'continued', status: null,
    };
    this.byId.set(id, entry);
    this.log.push(entry);
    if (this.forwardedFor && event.request.url.startsWith(`${this.edge}/`)) {
      const headers = Object.entries(event.request.headers)
        .filter(([name]) => name.toLowerCase() !== 'x-forwarded-for')
        .map(([name, value]) => ({ name, value }));
      headers.push({ name: 'X-Forwarded-For', value: this.forwardedFor });
      await this.cdp.send('Fetch.continueRequest', { requestId: id, headers });
    } else if (isLoopback(url.hostname) || url.protocol === 'data:') {
      await this.cdp.send('Fetch.continueRequest', { requestId: id });
    } else {
      entry.action = 'aborted';
      await this.cdp.send('Fetch.failRequest', { requestId: id, errorReason: 'BlockedByClient' });
    }
  }
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
    if ((await page.locator('ins.marquee').count()) === 0) {
      throw new Error('the page has no <ins class="marquee"> slot');
    }
    await page
      .waitForFunction(
        () => [...document.querySelectorAll('ins.marquee')].every((s) =>
          ['filled', 'empty', 'error'].includes(s.getAttribute('data-marquee'))),
        null,
        { timeout: left(), polling: 50 },
      )
      .catch(() => {
        throw new Error('the async tag did not finish: a slot never left data-marquee="pending"');
      });

    // What the tag asked the edge and what it answered.
    for (const e of network.log.filter((x) => x.url.startsWith(`${args.edge}/ad.json?`))) {
      let body = null;
      try {
        body = e.body ? JSON.parse(e.body) : null;
      } catch {
        body = e.body;
      }
      visit.ad_json.push({ url: e.url, status: e.status, body });
    }

    for (const handle of await page.locator('ins.marquee').elementHandles()) {
      const slot = await handle.evaluate((s) => ({
        placement: Number(s.getAttribute('data-placement')),
        state: s.getAttribute('data-marquee'),
        iframes: s.querySelectorAll('iframe').length,
      }));
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
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: FLAGS,
    timeout: 15000,
  });
  let network;
  try {
    network = new Network(await browser.newBrowserCDPSession());
    await network.start();
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

main().catch((error) => {
  process.stdout.write(`${JSON.stringify({ error: `driver failed: ${error && error.stack ? error.stack : error}` })}\n`);
  process.exitCode = 1;
});
