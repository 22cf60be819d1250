// The browser half of the creative library test (crates/marquee/tests/it/dashboard.rs runs it).
//
//   node tests/browser/library.mjs '<json>'
//
// The JSON names: base (the server), out (a directory for failure screenshots), screens
// (where the page screenshots go), admin ({name, password}), lineItem (a line item to add a
// library creative to), creative (a creative of the same advertiser uploaded under another
// line item, by id) and creativeName, and timeoutMs.
//
// Drives Debian's Chromium headless through playwright-core at 1280 and then 390 pixels wide,
// as a trafficker would: on the line item's page, "Add from library" picks the creative with a
// weight and a start time, and the Creatives list shows it; the creative's page names the line
// item under "Used by"; "Copy" lands on the paused copy, which uses the creative too; the
// creative is removed from the line item again; and from the line items list the copy is
// checked and archived in bulk, after a confirmation listing it.
//
// Prints one JSON object on stdout; on a failure it has "error" set, the process exits 1 and
// <out>/library-failure.png shows the page.
import path from 'node:path';
import { NARROW, WIDE, drive, signedInPage } from './session.mjs';

const config = JSON.parse(process.argv[2] ?? '{}');
const seen = { steps: [], widths: {} };
const started = Date.now();
const step = (what) => seen.steps.push(`${Date.now() - started}ms ${what}`);

async function shoot(page, name, suffix) {
  await page.screenshot({ path: path.join(config.screens, `${name}-${suffix}.png`), fullPage: true });
}

/** Whether the page scrolls sideways (the document wider than the window). */
const overflows = (page) => page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);

async function once(page, suffix, weight) {
  const shown = {};
  const lineItemUrl = `${config.base}/line-items/${config.lineItem}`;

  await page.goto(lineItemUrl);
  await page.click('#add-from-library summary');
  await page.check(`#add-from-library input[name="creative"][value="${config.creative}"]`);
  shown.preview_link = await page.getAttribute(
    `#add-from-library label:has(input[value="${config.creative}"]) a`, 'href');
  await page.fill('#add-from-library input[name="weight"]', String(weight));
  await page.fill('#add-from-library input[name="start"]', '2026-01-01T00:00');
  await Promise.all([page.waitForURL(/#creatives$/), page.click('#add-from-library button[type=submit]')]);
  shown.uses = await page.locator('#creative-uses > li').allTextContents();
  shown.overflows_line_item = await overflows(page);
  await shoot(page, 'line-item-creatives', suffix);
  step(`${suffix}: added from the library`);

  await page.goto(`${config.base}/creatives/${config.creative}`);
  shown.used_by = await page.locator('#used-by li').allTextContents();
  step(`${suffix}: used by`);

  await page.goto(lineItemUrl);
  await Promise.all([
    page.waitForURL((url) => /\/line-items\/\d+/.test(url.pathname) && !url.pathname.endsWith(`/${config.lineItem}`)),
    page.click('#copy-line-item button'),
  ]);
  shown.copy_id = Number(new URL(page.url()).pathname.split('/').pop());
  shown.copy_title = await page.textContent('h1');
  shown.copy_status = await page.inputValue('[name="status"]');
  shown.copy_uses = await page.locator('#creative-uses > li').allTextContents();
  step(`${suffix}: copied`);

  await page.goto(lineItemUrl);
  await Promise.all([
    page.waitForURL(/#creatives$/),
    page.click(`#creative-uses li:has(a[href="/creatives/${config.creative}"]) button[name="remove"]`),
  ]);
  shown.uses_after_remove = await page.locator('#creative-uses > li').allTextContents();
  step(`${suffix}: removed`);

  await page.goto(`${config.base}/line-items?q=${encodeURIComponent('Copy of')}`);
  await page.check(`#bulk input[name="id"][value="${shown.copy_id}"]`);
  shown.overflows_list = await overflows(page);
  await Promise.all([page.waitForURL(/\/line-items\/bulk$/), page.click('#bulk button[value="archive"]')]);
  shown.confirm = await page.locator('#confirm-bulk-archive #bulk-items > li').allTextContents();
  shown.overflows_confirm = await overflows(page);
  await shoot(page, 'bulk-archive', suffix);
  await page.click('#confirm-bulk-archive button[type=submit]');
  await page.waitForSelector('#bulk-results');
  shown.results_heading = await page.textContent('h1');
  shown.results = await page.locator('#bulk-results #bulk-items > li').allTextContents();
  step(`${suffix}: archived in bulk`);
  return shown;
}

async function run(browser) {
  const page = await signedInPage(browser, config, config.admin);
  step('signed in');
  for (const [size, suffix, weight] of [[WIDE, '1280', 30], [NARROW, '390', 40]]) {
    await page.setViewportSize(size);
    seen.widths[suffix] = await once(page, suffix, weight);
  }
  return page;
}

await drive(run, seen, started, config.out, 'library-failure.png');
