// The browser half of the report builder test (crates/marquee/tests/it/dashboard.rs runs it).
//
//   node tests/browser/reports.mjs '<json>'
//
// The JSON names: base (the server), out (a directory for failure screenshots and the CSV
// downloaded), screens (where the page screenshots go), admin ({name, password}), placement
// (the name of a placement that served today, typed into the filter) and timeoutMs.
//
// Drives Debian's Chromium headless through playwright-core, as a trafficker would, at 1280
// and 390 pixels wide: on Reports, the "Today" preset, two "Group by" boxes (line item and
// placement), "compare to the previous period", and the placement typed by its name; reloads
// until the served impressions are counted; then reads the table's cells (names beside ids,
// previous values), the chart's legend and its smallest label as drawn, whether the page
// scrolls sideways, and downloads the CSV through its link.
//
// Prints one JSON object on stdout; on a failure it has "error" set, the process exits 1 and
// <out>/reports-failure.png shows the page.
import fs from 'node:fs/promises';
import path from 'node:path';
import { chromium } from 'playwright-core';

const FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
const WIDE = { width: 1280, height: 900 };
const NARROW = { width: 390, height: 844 };

const config = JSON.parse(process.argv[2] ?? '{}');
const seen = { steps: [] };
const started = Date.now();
const step = (what) => seen.steps.push(`${Date.now() - started}ms ${what}`);

async function signIn(page, user) {
  await page.goto(`${config.base}/login`);
  await page.fill('#name', user.name);
  await page.fill('#password', user.password);
  await Promise.all([page.waitForURL(`${config.base}/`), page.click('button[type=submit]')]);
}

/** The report built through the form, as a trafficker fills it in. */
async function build(page, suffix) {
  const shown = {};
  await page.goto(`${config.base}/reports`);
  await page.selectOption('#period', 'today');
  await page.selectOption('[name="granularity"]', 'hour');
  await page.check('input[name="group_by"][value="line_item"]');
  await page.check('input[name="group_by"][value="placement"]');
  await page.check('input[name="compare"]');
  // The placement's name is offered by the autocomplete list; typed as it reads.
  shown.suggested = await page.locator(`#placement-names option[value="${config.placement}"]`).count();
  await page.fill('input[name="placement"]', config.placement);
  await Promise.all([page.waitForURL(/period=today/), page.click('form.filters button[type=submit]')]);
  shown.url = page.url();
  // The manager aggregates every second: reload until the impressions are counted.
  const deadline = Date.now() + 15_000;
  for (;;) {
    shown.impressions = Number(await page.getAttribute('#line-chart', 'data-impressions'));
    if (shown.impressions >= 1) break;
    if (Date.now() > deadline) throw new Error('no impression in the report');
    await page.waitForTimeout(300);
    await page.reload();
  }
  shown.error = await page.locator('p.error').count();
  shown.headings = await page.locator('#report thead th').allTextContents();
  shown.cells = await page.locator('#report tbody tr').first().locator('td').allTextContents();
  shown.previous = await page.locator('#report tbody td .previous').count();
  shown.covered = await page.textContent('#covered');
  shown.legend = await page.locator('#line-chart ul.legend li').allTextContents();
  shown.smallest_label = await page.evaluate(() => Math.min(...[...document.querySelectorAll('svg.chart')].flatMap((svg) => {
    const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    return [...svg.querySelectorAll('text.tick')].map((t) => parseFloat(getComputedStyle(t).fontSize) * scale);
  })));
  shown.overflows = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
  shown.compare_checked = await page.isChecked('input[name="compare"]');
  await page.screenshot({ path: path.join(config.screens, `report-builder-${suffix}.png`), fullPage: true });
  // The CSV through its link, as the browser downloads it.
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('a[href^="/reports.csv"]')]);
  const file = path.join(config.out, `report-${suffix}.csv`);
  await download.saveAs(file);
  const csv = await fs.readFile(file, 'utf8');
  const lines = csv.trim().split('\n');
  shown.csv_header = lines[0];
  shown.csv_rows = lines.length - 1;
  shown.csv_has_placement = lines.slice(1).some((line) => line.includes(config.placement));
  return shown;
}

async function run(browser) {
  const context = await browser.newContext({ viewport: WIDE, acceptDownloads: true });
  const page = await context.newPage();
  page.setDefaultTimeout(config.timeoutMs);
  await signIn(page, config.admin);
  step('signed in');
  seen.report = {};
  for (const [size, suffix] of [[WIDE, '1280'], [NARROW, '390']]) {
    await page.setViewportSize(size);
    seen.report[suffix] = await build(page, suffix);
    step(`report at ${suffix}`);
  }
  return page;
}

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
    if (last) await last.screenshot({ path: path.join(config.out, 'reports-failure.png'), fullPage: true });
  } catch {}
  console.log(JSON.stringify(seen));
  process.exitCode = 1;
} finally {
  await browser.close();
}
