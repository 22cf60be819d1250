// The browser half of the availability check test (crates/marquee/tests/it/dashboard.rs runs
// it).
//
//   node tests/browser/availability.mjs '<json>'
//
// The JSON names: base (the server), out (a directory for failure screenshots), screens (where
// the page screenshots go), admin ({name, password}), campaign (the campaign id the new line
// item is proposed under), edited (a booked line item whose form is checked with its name
// edited) and timeoutMs.
//
// Drives Debian's Chromium headless through playwright-core at 1280 and 390 pixels wide: a new
// line item typed into the form (name, flight of two weeks from tomorrow, price, an
// impressions goal, a device row), then "Check availability"; reads what the form kept, the
// Availability card's figures, its chart's legend and smallest label as drawn, the contending
// line items' names, and whether the page scrolls sideways; then the same on a booked line
// item's form with its name edited.
//
// Prints one JSON object on stdout; on a failure it has "error" set, the process exits 1 and
// <out>/availability-failure.png shows the page.
import path from 'node:path';
import { NARROW, WIDE, drive, signedInPage } from './session.mjs';

const config = JSON.parse(process.argv[2] ?? '{}');
const seen = { steps: [] };
const started = Date.now();
const step = (what) => seen.steps.push(`${Date.now() - started}ms ${what}`);
const NAME = 'Winter sun proposal';

function midnight(days) {
  const d = new Date(Date.now() + days * 86_400_000);
  return `${d.toISOString().slice(0, 10)}T00:00`;
}

async function check(page, suffix) {
  const shown = {};
  await page.goto(`${config.base}/line-items/new?parent=${config.campaign}`);
  await page.fill('[name="name"]', NAME);
  await page.fill('[name="start"]', midnight(1));
  await page.fill('[name="end"]', midnight(15));
  await page.fill('[name="time_zone"]', 'UTC');
  await page.fill('[name="price.amount"]', '2.50');
  await page.selectOption('[name="goal.metric"]', 'impressions');
  await page.fill('[name="goal.lifetime"]', '200000');
  await page.selectOption('[aria-label="Targeting attribute 1"]', 'device_type');
  await page.fill('[aria-label="Targeting values 1"]', 'desktop, phone');
  await Promise.all([page.waitForLoadState('domcontentloaded'), page.click('#check-availability')]);
  await page.waitForSelector('#availability', { timeout: config.timeoutMs });
  shown.url = page.url();
  shown.kept_name = await page.inputValue('[name="name"]');
  shown.kept_goal = await page.inputValue('[name="goal.lifetime"]');
  shown.kept_targeting = await page.inputValue('[aria-label="Targeting values 1"]');
  shown.message = await page.locator('#availability p[role="status"]').allTextContents();
  shown.facts = await page.locator('#availability dl.facts dt').allTextContents();
  shown.values = await page.locator('#availability dl.facts dd').allTextContents();
  shown.legend = await page.locator('#availability ul.legend li').allTextContents();
  shown.smallest_label = await page.evaluate(() => Math.min(...[...document.querySelectorAll('#availability svg.chart')].flatMap((svg) => {
    const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    return [...svg.querySelectorAll('text.tick')].map((t) => parseFloat(getComputedStyle(t).fontSize) * scale);
  })));
  shown.contending = await page.locator('#contending tbody td:first-child').allTextContents();
  shown.overflows = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
  await page.locator('#availability').scrollIntoViewIfNeeded();
  await page.screenshot({ path: path.join(config.screens, `availability-${suffix}.png`), fullPage: true });
  return shown;
}

/** "Check availability" on a booked line item's form, its name edited: the form keeps the
 * edit, and the line item does not contend with itself. */
async function checkEdit(page, suffix) {
  const shown = {};
  await page.goto(`${config.base}/line-items/${config.edited}`);
  const name = await page.inputValue('[name="name"]');
  shown.edited_name = `${name} (edited)`;
  await page.fill('[name="name"]', shown.edited_name);
  await Promise.all([page.waitForLoadState('domcontentloaded'), page.click('#check-availability')]);
  await page.waitForSelector('#availability', { timeout: config.timeoutMs });
  shown.kept_name = await page.inputValue('[name="name"]');
  shown.message = await page.locator('#availability p[role="status"]').allTextContents();
  shown.facts = await page.locator('#availability dl.facts dt').allTextContents();
  shown.contending = await page.locator('#contending tbody td:first-child').allTextContents();
  shown.overflows = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
  return shown;
}

async function run(browser) {
  const page = await signedInPage(browser, config, config.admin);
  step('signed in');
  seen.check = {};
  for (const [size, suffix] of [[WIDE, '1280'], [NARROW, '390']]) {
    await page.setViewportSize(size);
    seen.check[suffix] = await check(page, suffix);
    step(`checked at ${suffix}`);
    seen.edit = seen.edit ?? {};
    seen.edit[suffix] = await checkEdit(page, suffix);
    step(`checked an edit at ${suffix}`);
  }
  return page;
}

await drive(run, seen, started, config.out, 'availability-failure.png');
