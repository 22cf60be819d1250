// What the dashboard's page drivers (dashboard.mjs, desk.mjs, reports.mjs, roles.mjs) share: the window
// sizes, a signed-in page, an image to upload, and the run that prints what was seen, as JSON on
// stdout.
import path from 'node:path';
import { chromium } from 'playwright-core';
import { FLAGS } from './intercept.mjs';

export const WIDE = { width: 1280, height: 900 };
export const NARROW = { width: 390, height: 844 };

/** Signs `user` ({ name, password }) in on the dashboard at `base`. */
export async function signIn(page, base, user) {
  await page.goto(`${base}/login`);
  await page.fill('#name', user.name);
  await page.fill('#password', user.password);
  await Promise.all([page.waitForURL(`${base}/`), page.click('button[type=submit]')]);
}

/** A wide page of a new context of `browser`, `user` signed in, with the run's timeout. */
export async function signedInPage(browser, config, user) {
  const context = await browser.newContext({ viewport: WIDE });
  const page = await context.newPage();
  page.setDefaultTimeout(config.timeoutMs);
  await signIn(page, config.base, user);
  return page;
}

/**
 * Launches Chromium and runs `run(browser)`, which returns its last page, then prints `seen`.
 * On a failure `seen` has "error" set, the process exits 1 and `<out>/<failure>` shows the
 * last page.
 */
export async function drive(run, seen, started, out, failure) {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: FLAGS,
  });
  let current = null;
  try {
    current = await run(browser);
    seen.elapsed_ms = Date.now() - started;
    console.log(JSON.stringify(seen));
  } catch (error) {
    seen.error = String(error?.stack ?? error);
    try {
      const pages = browser.contexts().flatMap((c) => c.pages());
      const last = current ?? pages[pages.length - 1];
      if (last) await last.screenshot({ path: path.join(out, failure), fullPage: true });
    } catch {}
    console.log(JSON.stringify(seen));
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}

/** A PNG's signature and header chunk: `w`×`h` as far as any reader of its header knows. */
export function pngHeader(w, h) {
  const bytes = Buffer.alloc(33);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(bytes, 0);
  bytes.writeUInt32BE(13, 8);
  bytes.write('IHDR', 12, 'latin1');
  bytes.writeUInt32BE(w, 16);
  bytes.writeUInt32BE(h, 20);
  bytes[24] = 8;
  bytes[25] = 6;
  return bytes;
}
