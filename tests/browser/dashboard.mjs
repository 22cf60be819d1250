// The browser half of the dashboard's end-to-end test (crates/marquee/tests/dashboard.rs runs
// it).
//
//   node tests/browser/dashboard.mjs '<json>'
//
// The JSON names: base (the server), out (a directory for failure screenshots and the
// browser profile), screens (where the page screenshots go), admin and advertiser ({name,
// password}), campaign (a campaign of another advertiser than the advertiser user's),
// placement (id of a 300x250 placement), paced (a line item with a goal, whose page is
// shown for its pacing view) and timeoutMs.
//
// Drives Debian's Chromium headless through playwright-core, as an ad-ops user would: signs
// in, gets a validation error at its field, creates a line item with a targeting row and a
// frequency cap, a creative for it, links it to the placement, waits until why-not-served on
// the latest snapshot says it serves there, loads a publisher page carrying the placement's
// async tag (copied from the placement's page), then reloads the report until its chart counts
// the impression. It books a second line item with a spend goal typed in dollars ("500") and
// reads it back as money, and, at 1280 and 390 pixels wide, submits a line item form with
// three mistakes (end before start, a goal amount with three decimals, a device the model does
// not know) to see all three at once, linked from a summary, with everything typed kept.
// Then: a form post without the CSRF token (403), and the advertiser user opening the line
// item (404). Screenshots of home, line item, report and why-not-served at 1280 and 390
// pixels wide, and of the refused form at each width.
//
// Prints one JSON object on stdout; on a failure it has "error" set, the process exits 1 and
// <out>/failure.png shows the page.
import http from 'node:http';
import path from 'node:path';
import { NARROW, WIDE, drive, signedInPage } from './session.mjs';

const NAME = 'Dashboard e2e winter';

const config = JSON.parse(process.argv[2] ?? '{}');
const seen = { steps: [] };
const started = Date.now();
const step = (what) => seen.steps.push(`${Date.now() - started}ms ${what}`);

/** The UTC date `days` from today, as datetime-local text at midnight. */
function midnight(days) {
  const d = new Date(Date.now() + days * 86_400_000);
  return `${d.toISOString().slice(0, 10)}T00:00`;
}


async function fillLineItem(page, end) {
  await page.goto(`${config.base}/line-items/new`);
  await page.selectOption('[name="campaign_id"]', String(config.campaign));
  await page.fill('[name="name"]', NAME);
  await page.fill('[name="start"]', midnight(-1));
  await page.fill('[name="end"]', end);
  await page.fill('[name="time_zone"]', 'UTC');
  await page.selectOption('[name="tier"]', 'sponsorship');
  await page.fill('[name="price.amount"]', '5');
  await page.fill('[name="price.currency"]', 'USD');
  await page.fill('[aria-label="Cap count 1"]', '5');
  await page.fill('[aria-label="Cap window 1"]', '1d');
  await page.selectOption('[aria-label="Targeting attribute 1"]', 'device_type');
  await page.selectOption('[aria-label="Targeting operator 1"]', 'not_in');
  await page.fill('[aria-label="Targeting values 1"]', 'tablet, ctv');
  await page.click('form.object button[type=submit]');
  await page.waitForLoadState('domcontentloaded');
}

/** A new line item under the configured campaign, priced at 4.50 in its advertiser's
 * currency, with a daily spend goal of `daily` (as typed), and a device row when given. */
async function fillSpendGoal(page, { end, daily, device }) {
  await page.goto(`${config.base}/line-items/new?parent=${config.campaign}`);
  await page.fill('[name="name"]', `${NAME} budget`);
  await page.fill('[name="start"]', midnight(-1));
  await page.fill('[name="end"]', end);
  await page.fill('[name="time_zone"]', 'UTC');
  await page.fill('[name="price.amount"]', '4.50');
  await page.selectOption('[name="goal.metric"]', 'spend');
  await page.fill('[name="goal.daily"]', daily);
  if (device) {
    await page.selectOption('[aria-label="Targeting attribute 1"]', 'device_type');
    await page.fill('[aria-label="Targeting values 1"]', device);
  }
  await page.click('form.object button[type=submit]');
  await page.waitForLoadState('domcontentloaded');
}

/** What a refused form shows: the summary's items and links, and what each field kept. */
async function refusedForm(page) {
  const items = page.locator('.error-summary li');
  const shown = {
    heading: await page.textContent('.error-summary h2'),
    items: await items.allTextContents(),
    links: await page.locator('.error-summary li a').evaluateAll((links) => links.map((a) => a.getAttribute('href'))),
    beside: {
      end: await page.textContent('[data-field="end"] .field-error'),
      daily: await page.textContent('[data-field="goal.daily"] .field-error'),
      targeting: await page.textContent('[data-field="targeting"] .field-error'),
    },
    kept: {
      name: await page.inputValue('[name="name"]'),
      price: await page.inputValue('[name="price.amount"]'),
      metric: await page.inputValue('[name="goal.metric"]'),
      daily: await page.inputValue('[name="goal.daily"]'),
      device: await page.inputValue('[aria-label="Targeting values 1"]'),
    },
  };
  // The summary's link takes the reader to the field, on a narrow screen too.
  await page.click('.error-summary a[href="#f-goal.daily"]');
  shown.hash = await page.evaluate(() => location.hash);
  // In view: aligned to the top, give or take a sub-pixel border.
  shown.field_in_view = await page.locator('[id="f-goal.daily"]').evaluate((input) => {
    const box = input.getBoundingClientRect();
    return box.top >= -1 && box.bottom <= window.innerHeight + 1;
  });
  shown.focused = await page.evaluate(() => document.activeElement?.id ?? '');
  return shown;
}

async function shoot(page, name) {
  for (const [size, suffix] of [[WIDE, '1280'], [NARROW, '390']]) {
    await page.setViewportSize(size);
    await page.screenshot({ path: path.join(config.screens, `${name}-${suffix}.png`), fullPage: true });
  }
  await page.setViewportSize(WIDE);
}

async function run(browser) {
  const page = await signedInPage(browser, config, config.admin);
  const admin = page.context();
  step('signed in');

  // A rule broken in the form: shown at its field, nothing stored.
  await fillLineItem(page, midnight(-2));
  seen.validation_error = await page.textContent('[data-field="end"] .field-error');
  step('validation error shown');

  await fillLineItem(page, midnight(30));
  await page.waitForURL(/\/line-items\/\d+\?saved=1$/);
  seen.line_item = Number(/line-items\/(\d+)/.exec(page.url())[1]);
  step(`line item ${seen.line_item} created`);

  await page.goto(`${config.base}/creatives/new?parent=${seen.line_item}`);
  await page.fill('[name="name"]', 'Winter sale banner');
  await page.fill('[name="size"]', '300x250');
  await page.fill('[name="landing_url"]', 'https://shop.example/winter');
  await page.selectOption('[name="content.type"]', 'html');
  await page.fill('[name="content.html"]',
    '<div style="width:300px;height:250px;background:#0b5;color:#fff;font:24px sans-serif;' +
    'display:flex;align-items:center;justify-content:center">Winter sale e2e</div>');
  await Promise.all([page.waitForURL(/\/creatives\/\d+\?saved=1$/), page.click('form.object button[type=submit]')]);
  seen.creative_preview = await page.locator('iframe.preview').count();
  step('creative created');

  await page.goto(`${config.base}/line-items/${seen.line_item}`);
  await page.selectOption('[aria-label="Placement to link"]', String(config.placement));
  await Promise.all([page.waitForURL(/#placements$/), page.click('#placements button:has-text("Link")')]);
  seen.linked = await page.textContent('#placements ul');
  step('linked');

  // The next snapshot has it: explain mode on the manager's latest snapshot says it serves.
  const explain = `${config.base}/why-not-served?placement=${config.placement}&device=desktop&country=DE`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    await page.goto(explain);
    seen.explain = (await page.textContent('main h2')) ?? '';
    if (seen.explain.includes(NAME)) break;
    if (Date.now() > deadline) throw new Error(`not in the snapshot: ${seen.explain}`);
    await page.waitForTimeout(200);
  }
  step('in the snapshot');

  // The placement's generated async tag, copied from its page, on a publisher's page.
  await page.goto(`${config.base}/placements/${config.placement}`);
  const tag = await page.inputValue('#tag-async');
  const publisher = await admin.newPage();
  seen.publisher = [];
  publisher.on('console', (m) => seen.publisher.push(`console ${m.type()}: ${m.text()}`));
  publisher.on('requestfailed', (r) => seen.publisher.push(`failed ${r.url()}: ${r.failure()?.errorText}`));
  publisher.on('response', (r) => seen.publisher.push(`${r.status()} ${r.url()}`));
  // A real server on loopback, reached as localhost: Chromium lets a loopback page reach the
  // edge at 127.0.0.1, a different site from it, as a publisher and its ad server are.
  const body = `<!doctype html><html><head><link rel="icon" href="data:,"></head><body><h1>Article</h1>${tag}</body></html>`;
  const server = http.createServer((_, response) => {
    response.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    response.end(body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  await publisher.goto(`http://localhost:${server.address().port}/article.html`);
  const frame = publisher.frameLocator('ins.marquee iframe');
  seen.tag = tag;
  seen.ad_text = await frame.locator('body').textContent({ timeout: 10_000 });
  server.close();
  step('ad shown');

  // The impression reaches the report chart.
  // Today's date in UTC, so the report is asked in UTC too (in the advertiser's zone that
  // day may not have begun).
  const today = new Date().toISOString().slice(0, 10);
  const report = `${config.base}/reports?from=${today}&tz=UTC&granularity=minute&line_item=${seen.line_item}&group_by=placement`;
  const reportDeadline = Date.now() + 15_000;
  for (;;) {
    await page.goto(report);
    seen.impressions = Number(await page.getAttribute('#line-chart', 'data-impressions'));
    if (seen.impressions >= 1) break;
    if (Date.now() > reportDeadline) throw new Error('no impression in the report');
    await page.waitForTimeout(300);
  }
  seen.report_svg = await page.locator('#line-chart svg polyline').count();
  step('impression in the report');

  // A spend goal typed in dollars is kept as dollars and shown back as money.
  await fillSpendGoal(page, { end: midnight(30), daily: '500' });
  await page.waitForURL(/\/line-items\/\d+\?saved=1$/);
  seen.budget = {
    daily: await page.inputValue('[name="goal.daily"]'),
    unit: await page.textContent('[data-field="goal.daily"] .unit'),
    pacing: await page.textContent('#pacing'),
    id: Number(/line-items\/(\d+)/.exec(page.url())[1]),
  };
  step('spend goal booked');

  // Three mistakes in one form, wide and narrow: all three at once, nothing lost.
  seen.mistakes = {};
  for (const [size, suffix] of [[WIDE, '1280'], [NARROW, '390']]) {
    await page.setViewportSize(size);
    await fillSpendGoal(page, { end: midnight(-2), daily: '12.345', device: 'mobile' });
    seen.mistakes[suffix] = await refusedForm(page);
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: path.join(config.screens, `form-errors-${suffix}.png`), fullPage: true });
  }
  await page.setViewportSize(WIDE);
  step('three mistakes shown at once');

  // Screenshots of the four pages, wide and narrow.
  await shoot(page, 'report');
  await page.goto(`${config.base}/`);
  await shoot(page, 'home');
  // A line item with a goal, for its pacing view.
  await page.goto(`${config.base}/line-items/${config.paced}`);
  seen.pacing = await page.textContent('#pacing');
  await shoot(page, 'line-item');
  await page.goto(explain);
  await shoot(page, 'why-not-served');
  step('screenshots');

  // A form post without the session's CSRF token (the browser's cookies, no token).
  const forged = await admin.request.post(`${config.base}/advertisers`, {
    form: { name: 'Forged', status: 'active', currency: 'USD', time_zone: 'UTC' },
    maxRedirects: 0,
  });
  seen.csrf_status = forged.status();

  // The advertiser user cannot open another advertiser's line item.
  const tenantPage = await signedInPage(browser, config, config.advertiser);
  const foreign = await tenantPage.goto(`${config.base}/line-items/${seen.line_item}`);
  seen.foreign_status = foreign.status();
  seen.foreign_text = await tenantPage.textContent('main');
  step('tenancy');
  return page;
}

await drive(run, seen, started, config.out, 'failure.png');
