// The browser half of the ad-ops desk test (crates/marquee/tests/it/dashboard.rs runs it).
//
//   node tests/browser/desk.mjs '<json>'
//
// The JSON names: base (the server), out (a directory for failure screenshots), screens
// (where the page screenshots go), admin ({name, password}), campaign (the name of a demo
// campaign, to filter line items by), lineItem (a line item to add creatives to), paced (a
// line item with a goal, for its chart), site (a site to archive) and placement (one of that
// site's placements), mobile (a placement the demo's "Boots DACH mobile" fits), and timeoutMs.
//
// Drives Debian's Chromium headless through playwright-core, as a trafficker would, at 1280
// and 390 pixels wide: the line items list (columns, sorting by a heading, filtering by the
// campaign's name from the autocomplete list); a placement's archive asked first with what
// depends on it, then its site archived and the placement shown as stopped by it; a text file
// named .png refused at upload, an image of the wrong size refused at the size and kept with
// the form, saved once the size is fixed; a new placement's site left to choose; and, at 390
// pixels, every section reachable from the navigation without sideways scrolling, the
// pacing chart's labels at least 11 px with a legend, and why-not-served narrowed to one line
// item showing the request's country beside the targeted ones.
//
// Prints one JSON object on stdout; on a failure it has "error" set, the process exits 1 and
// <out>/desk-failure.png shows the page.
import path from 'node:path';
import { NARROW, WIDE, drive, pngHeader, signedInPage } from './session.mjs';


const config = JSON.parse(process.argv[2] ?? '{}');
const seen = { steps: [] };
const started = Date.now();
const step = (what) => seen.steps.push(`${Date.now() - started}ms ${what}`);



async function shoot(page, name, suffix) {
  await page.screenshot({ path: path.join(config.screens, `${name}-${suffix}.png`), fullPage: true });
}

/** Whether the page scrolls sideways (the document wider than the window). */
const overflows = (page) => page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);

/** The outermost elements reaching past the window's right edge, for a failure's message. */
const widest = (page) => page.evaluate(() => [...document.querySelectorAll('body *')]
  .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)
  .filter((e) => !e.parentElement || e.parentElement.getBoundingClientRect().right <= window.innerWidth + 1)
  .slice(0, 5)
  .map((e) => `${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}${e.className ? '.' + String(e.className).replace(/ /g, '.') : ''} ${Math.round(e.getBoundingClientRect().right)}px`));

/** The line items list: headings, a sort by name, a filter by the campaign's name. */
async function lists(page, suffix) {
  const shown = {};
  await page.goto(`${config.base}/line-items`);
  // The first column is the bulk actions' checkbox.
  shown.headings = await page.locator('table.list thead th').allTextContents();
  shown.overflows = await overflows(page);
  await Promise.all([page.waitForURL(/sort=name/), page.click('table.list thead th a:text-is("name")')]);
  shown.sorted = await page.getAttribute('table.list thead th:nth-child(3)', 'aria-sort');
  const names = await page.locator('table.list tbody tr td:nth-child(3)').allTextContents();
  shown.names_sorted = names.every((n, i) => i === 0 || names[i - 1].toLowerCase() <= n.toLowerCase());
  // The campaign's name is offered by the autocomplete list; typed in part, in any case.
  shown.suggested = await page.locator(`#parent-names option[value="${config.campaign}"]`).count();
  await page.fill('input[name="parent"]', config.campaign.slice(0, 6).toUpperCase());
  await Promise.all([page.waitForURL(/parent=/), page.click('form.filters button[type=submit]')]);
  shown.parents = [...new Set(await page.locator('table.list tbody tr td:nth-child(5)').allTextContents())];
  shown.rows = await page.locator('table.list tbody tr').count();
  shown.pacing = await page.locator('table.list tbody tr td:nth-child(12)').allTextContents();
  await shoot(page, 'line-items', suffix);
  return shown;
}

/** A creative form with the image upload, for the configured line item. */
async function fillCreative(page, { size, file }) {
  await page.goto(`${config.base}/creatives/new?parent=${config.lineItem}`);
  await page.fill('[name="name"]', 'Desk upload');
  await page.fill('[name="size"]', size);
  await page.fill('[name="landing_url"]', 'https://shop.example/desk');
  await page.selectOption('[name="content.type"]', 'image');
  if (file) await page.setInputFiles('#f-image_file', file);
  await page.click('form.object button[type=submit]');
  await page.waitForLoadState('domcontentloaded');
}

async function uploads(page) {
  const shown = {};
  await fillCreative(page, {
    size: '300x250',
    file: { name: 'notes.png', mimeType: 'image/png', buffer: Buffer.from('meeting notes, not a picture\n') },
  });
  shown.text_refused = await page.textContent('[data-field="image_file"] .field-error');
  await fillCreative(page, {
    size: '728x90',
    file: { name: 'rectangle.png', mimeType: 'image/png', buffer: pngHeader(300, 250) },
  });
  shown.size_refused = await page.textContent('[data-field="size"] .field-error');
  shown.kept = await page.textContent('#kept-upload');
  // Fix the size only: the image comes back with the form.
  await page.fill('[name="size"]', '');
  await Promise.all([page.waitForURL(/\/creatives\/\d+\?saved=1$/), page.click('form.object button[type=submit]')]);
  shown.saved_size = await page.inputValue('[name="size"]');
  shown.image_url = await page.inputValue('[name="content.image_url"]');
  // Refused again, then another file chosen: it replaces the kept one.
  await fillCreative(page, {
    size: '728x90',
    file: { name: 'rectangle.png', mimeType: 'image/png', buffer: pngHeader(300, 250) },
  });
  await page.setInputFiles('#f-image_file', { name: 'leaderboard.png', mimeType: 'image/png', buffer: pngHeader(728, 90) });
  shown.kept_after_new_file = await page.locator('#kept-upload').count();
  await Promise.all([page.waitForURL(/\/creatives\/\d+\?saved=1$/), page.click('form.object button[type=submit]')]);
  shown.replaced_size = await page.inputValue('[name="size"]');
  return shown;
}

async function archiving(page, suffix) {
  const shown = {};
  await page.goto(`${config.base}/placements/${config.placement}`);
  await page.click('form.danger button[type=submit]');
  await page.waitForSelector('#confirm-archive');
  shown.asked = await page.locator('#consequences li').allTextContents();
  await shoot(page, 'archive-confirm', suffix);
  // Kept: nothing changed.
  await Promise.all([page.waitForURL(new RegExp(`/placements/${config.placement}$`)), page.click('text=Keep it')]);
  shown.kept_serving = await page.locator('#serving').count();
  return shown;
}

async function archiveSite(page) {
  const shown = {};
  await page.goto(`${config.base}/sites/${config.site}`);
  await page.click('form.danger button[type=submit]');
  await page.waitForSelector('#confirm-archive');
  shown.asked = await page.locator('#consequences li').allTextContents();
  await Promise.all([page.waitForURL(new RegExp(`/sites/${config.site}$`)), page.click('button:has-text("Archive for good")')]);
  shown.site = await page.textContent('#serving');
  await page.goto(`${config.base}/placements/${config.placement}`);
  shown.placement = await page.textContent('#serving');
  await page.goto(`${config.base}/placements?status=stopped`);
  shown.stopped = await page.locator('table.list tbody tr td:nth-child(3)').allTextContents();
  return shown;
}

/** At 390 px: every section's link in view, no page scrolling sideways, chart labels. */
async function narrow(page) {
  const shown = { links: {}, overflow: {} };
  await page.goto(`${config.base}/`);
  const links = page.locator('header.top nav a');
  for (let i = 0; i < (await links.count()); i++) {
    const link = links.nth(i);
    const box = await link.boundingBox();
    const name = (await link.textContent()).trim();
    shown.links[name] = box !== null && box.x >= 0 && box.x + box.width <= NARROW.width && (await link.isVisible());
  }
  for (const section of ['/', '/line-items', '/placements', '/reports', '/why-not-served', '/edges', `/line-items/${config.paced}`]) {
    await page.goto(`${config.base}${section}`);
    shown.overflow[section] = await overflows(page);
    if (shown.overflow[section]) shown[`wide ${section}`] = await widest(page);
  }
  // Every chart's labels at least 11 px as drawn (home, reports, the pacing chart), and the
  // pacing chart's legend naming both lines.
  const smallestLabel = () => page.evaluate(() => Math.min(...[...document.querySelectorAll('svg.chart')].flatMap((svg) => {
    const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    return [...svg.querySelectorAll('text.tick')].map((t) => parseFloat(getComputedStyle(t).fontSize) * scale);
  })));
  shown.smallest_label = {};
  for (const section of ['/', '/reports', `/line-items/${config.paced}`]) {
    await page.goto(`${config.base}${section}`);
    shown.smallest_label[section] = await smallestLabel();
  }
  shown.legend = await page.locator('#pacing ul.legend li').allTextContents();
  // Why not served, narrowed to one line item typed in part: its verdict with the request's
  // value beside the targeted ones.
  await page.goto(`${config.base}/why-not-served?placement=${config.mobile}&country=US&device=desktop`);
  await page.fill('input[name="line_item"]', 'boots dach');
  await Promise.all([page.waitForURL(/line_item=/), page.click('form.filters button[type=submit]')]);
  shown.explained = await page.locator('#verdicts tbody tr').allTextContents();
  shown.explain_overflows = await overflows(page);
  await shoot(page, 'why-not-served-one', '390');
  await shoot(page, 'line-item-chart', '390');
  return shown;
}

async function run(browser) {
  const page = await signedInPage(browser, config, config.admin);
  step('signed in');

  seen.lists = {};
  seen.archiving = {};
  for (const [size, suffix] of [[WIDE, '1280'], [NARROW, '390']]) {
    await page.setViewportSize(size);
    seen.lists[suffix] = await lists(page, suffix);
    seen.archiving[suffix] = await archiving(page, suffix);
  }
  step('lists and archive asked');

  await page.setViewportSize(NARROW);
  seen.uploads = await uploads(page);
  step('uploads');

  await page.goto(`${config.base}/placements/new`);
  seen.new_placement_site = await page.inputValue('[name="site_id"]');

  seen.narrow = await narrow(page);
  step('narrow');

  await page.setViewportSize(WIDE);
  seen.site_archived = await archiveSite(page);
  step('site archived');
  return page;
}

await drive(run, seen, started, config.out, 'desk-failure.png');
