// What the browser drivers of the ad tag (e2e.mjs, geo.mjs, prebid.mjs) share: Chromium's
// flags (the dashboard's drivers take them too) and its launch, the command line, the
// interceptor every request of the browser passes through, and the waits on the async tag.
//
// The interceptor sits on the browser target (CDP `Fetch`): Playwright's own events and `route`
// do not see the requests of the ads' sandboxed srcdoc iframes (the impression beacons).
// Loopback requests go through and their answers are recorded (the body of /ad.json answers
// too); creative images on other hosts are answered with a stand-in picture; every other
// request to another host is aborted. Nothing leaves the machine.

import { chromium } from 'playwright-core';

// The flags known to work on these machines: no sandbox as root, no GPU, and no background
// traffic to Google's services.
export const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Chromium, headless, with [`FLAGS`]. */
export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: FLAGS,
    timeout: 15000,
  });
}

/**
 * Reads a driver's command line into `args`: `--edge`, `--out` and `--timeout-ms` here, any
 * other `--flag` through `flag(name, value)` and any other word through `word(text)`, each
 * false for what it does not take (an unknown argument).
 */
export function readArgs(argv, args, flag, word) {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    let taken = true;
    if (a === '--edge') args.edge = value().replace(/\/+$/, '');
    else if (a === '--out') args.out = value();
    else if (a === '--timeout-ms') args.timeoutMs = Number(value());
    else taken = a.startsWith('--') ? flag(a, value) : word(a);
    if (!taken) throw new Error(`unknown argument ${a}`);
  }
  return args;
}

/** Runs the driver's `main`; what it throws is printed as the JSON the test reads (exit 1). */
export function run(main) {
  main().catch((error) => {
    process.stdout.write(`${JSON.stringify({ error: `driver failed: ${error && error.stack ? error.stack : error}` })}\n`);
    process.exitCode = 1;
  });
}

/** What an async tag slot (`<ins class="marquee">`) says of itself. */
export function slotOf(handle) {
  return handle.evaluate((s) => ({
    placement: Number(s.getAttribute('data-placement')),
    state: s.getAttribute('data-marquee'),
    iframes: s.querySelectorAll('iframe').length,
  }));
}

export const isLoopback = (host) => ['127.0.0.1', 'localhost', '[::1]'].includes(host);

/** A stand-in for a creative image on an unreachable host, so the screenshot shows the ad. */
function standInImage(url) {
  const m = /(\d+)x(\d+)/.exec(url);
  const [w, h] = m ? [Number(m[1]), Number(m[2])] : [300, 250];
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}">` +
    '<rect width="100%" height="100%" fill="#b91c1c"/>' +
    '<text x="50%" y="50%" fill="#fff" font-family="sans-serif" font-size="18" ' +
    `text-anchor="middle" dominant-baseline="middle">stand-in for ${w}x${h} image</text></svg>`;
  return {
    responseCode: 200,
    responseHeaders: [{ name: 'Content-Type', value: 'image/svg+xml' }],
    body: Buffer.from(svg).toString('base64'),
  };
}

/**
 * Intercepts every request of the browser (all targets) and keeps a log: one entry per request
 * hop, `{ id, url, method, type, action, status, location, headers, redirected_from, body }`.
 * With `visit(edge, address)`, a new log starts and every request for `edge` carries
 * `X-Forwarded-For: address`, as a proxy in front of the edge would add it: below the page, so
 * that the browser does not take the header for the page's own and ask a CORS preflight first.
 */
export class Network {
  constructor(cdp) {
    this.cdp = cdp;
    this.log = [];
    this.errors = [];
    this.byId = new Map();
    this.edge = null;
    this.forwardedFor = null;
  }

  /** The interceptor of every request of `browser`, started. */
  static async on(browser) {
    const network = new Network(await browser.newBrowserCDPSession());
    await network.start();
    return network;
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
    const responding = event.responseStatusCode !== undefined || event.responseErrorReason !== undefined;
    if (responding) {
      const entry = this.byId.get(id) ?? { id, url: event.request.url };
      entry.status = event.responseStatusCode ?? null;
      entry.failure = event.responseErrorReason ?? null;
      entry.headers = Object.fromEntries(
        (event.responseHeaders ?? []).map((h) => [h.name.toLowerCase(), h.value]));
      entry.location = entry.headers.location ?? null;
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
      id,
      url: event.request.url,
      method: event.request.method,
      type: event.resourceType,
      redirected_from: event.redirectedRequestId ?? null,
      action: 'continued',
      status: null,
      location: null,
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
    } else if (event.resourceType === 'Image') {
      entry.action = 'stand-in image';
      await this.cdp.send('Fetch.fulfillRequest', { requestId: id, ...standInImage(entry.url) });
    } else {
      entry.action = 'aborted';
      await this.cdp.send('Fetch.failRequest', { requestId: id, errorReason: 'BlockedByClient' });
    }
  }

  /** Log entries without the large fields, for the result. */
  summary() {
    return this.log.map(({ body: _body, headers: _headers, ...rest }) => rest);
  }

  /** Each /ad.json exchange with `edge` so far: `{ url, status, headers, body }`. */
  adJson(edge) {
    return this.log
      .filter((e) => e.url.startsWith(`${edge}/ad.json?`))
      .map((e) => {
        let body = null;
        try {
          body = e.body ? JSON.parse(e.body) : null;
        } catch {
          body = e.body;
        }
        return { url: e.url, status: e.status, headers: e.headers ?? {}, body };
      });
  }
}

/**
 * Waits until the async tag settled every `<ins class="marquee">` slot of `page` (filled,
 * empty or error); fails when the page has none or one stays pending past `left()`.
 */
export async function waitForSlots(page, left) {
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
      throw new Error('the async tag did not finish: a slot never left data-marquee="pending" (or was never touched)');
    });
}
