// The browser half of the roles test (crates/marquee/tests/it/dashboard.rs runs it).
//
//   node tests/browser/roles.mjs '<json>'
//
// The JSON names: base (the server), out (a directory for failure screenshots), screens (where
// the page screenshots go), admin and advertiser ({name, password}), lineItem (a line item of
// the advertiser's) and timeoutMs.
//
// At 1280 and 390 pixels wide: the advertiser's user opens its line item and reads tier and
// price as text, not inputs, then uploads a creative, which shows pending approval; the admin
// finds it in the creatives list's pending queue and approves it on its page; the admin's
// Audit page lists those changes and, filtered by kind and object, the approval.
//
// Prints one JSON object on stdout; on a failure it has "error" set, the process exits 1 and
// <out>/roles-failure.png shows the page.
import path from 'node:path';
import { NARROW, WIDE, drive, pngHeader, signedInPage } from './session.mjs';

const config = JSON.parse(process.argv[2] ?? '{}');
const seen = { steps: [] };
const started = Date.now();
const step = (what) => seen.steps.push(`${Date.now() - started}ms ${what}`);

const overflows = (page) => page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);

async function shoot(page, name, suffix) {
  await page.screenshot({ path: path.join(config.screens, `${name}-${suffix}.png`), fullPage: true });
}

/** The advertiser's line item page: what it may not change, shown as text. */
async function lineItem(page, suffix) {
  const shown = {};
  await page.goto(`${config.base}/line-items/${config.lineItem}`);
  shown.tier = (await page.textContent('[data-field="tier"] p.fixed')).trim();
  shown.price = (await page.textContent('[data-field="price.amount"] p.fixed')).trim();
  shown.tier_inputs = await page.locator('[data-field="tier"] select, [data-field="price.amount"] input[type="text"]').count();
  shown.name_editable = await page.locator('[data-field="name"] input[name="name"]').count();
  shown.overflows = await overflows(page);
  await shoot(page, 'roles-line-item', suffix);
  return shown;
}

/** The advertiser uploads a creative for its line item: saved, pending approval. */
async function propose(page, suffix) {
  await page.goto(`${config.base}/creatives/new?parent=${config.lineItem}`);
  await page.fill('[name="name"]', `Proposed banner ${suffix}`);
  await page.fill('[name="size"]', '300x250');
  await page.fill('[name="landing_url"]', 'https://shop.example/proposed');
  await page.selectOption('[name="content.type"]', 'image');
  await page.setInputFiles('#f-image_file', { name: 'proposed.png', mimeType: 'image/png', buffer: pngHeader(300, 250) });
  await Promise.all([page.waitForURL(/\/creatives\/\d+\?saved=1$/), page.click('form.object button[type=submit]')]);
  const id = Number(new URL(page.url()).pathname.split('/').pop());
  return {
    id,
    state: (await page.textContent('#approval .approval-state')).trim(),
    review_buttons: await page.locator('#approval button').count(),
  };
}

/** The admin's queue, then Approve on the creative's page. */
async function approve(page, id, suffix) {
  const shown = {};
  await page.goto(`${config.base}/creatives`);
  await page.selectOption('select[name="approval"]', 'pending');
  await Promise.all([page.waitForURL(/approval=pending/), page.click('form.filters button[type=submit]')]);
  shown.queued = await page.locator(`table.list a[href="/creatives/${id}"]`).count();
  await page.goto(`${config.base}/creatives/${id}`);
  await Promise.all([page.waitForURL(/#approval$/), page.click('#approval button:text-is("Approve")')]);
  shown.state = (await page.textContent('#approval .approval-state')).trim();
  shown.overflows = await overflows(page);
  await shoot(page, 'roles-creative-approved', suffix);
  return shown;
}

/** The Audit page: the latest changes, then filtered to the creative's own. */
async function audit(page, id, suffix) {
  const shown = {};
  await page.goto(`${config.base}/audit`);
  shown.nav = await page.locator('.top nav a[href="/audit"]').isVisible();
  shown.rows = await page.locator('#audit tbody tr').allTextContents();
  await page.selectOption('select[name="kind"]', 'creative');
  await page.fill('input[name="object"]', String(id));
  await Promise.all([page.waitForURL(/object=/), page.click('form.filters button[type=submit]')]);
  shown.filtered = await page.locator('#audit tbody tr').allTextContents();
  shown.overflows = await overflows(page);
  await shoot(page, 'audit', suffix);
  return shown;
}

async function run(browser) {
  const advertiser = await signedInPage(browser, config, config.advertiser);
  const admin = await signedInPage(browser, config, config.admin);
  step('signed in');
  let last = admin;
  for (const [size, suffix] of [[WIDE, '1280'], [NARROW, '390']]) {
    const shown = {};
    await advertiser.setViewportSize(size);
    await admin.setViewportSize(size);
    last = advertiser;
    shown.line_item = await lineItem(advertiser, suffix);
    shown.proposed = await propose(advertiser, suffix);
    step(`proposed at ${suffix}`);
    last = admin;
    shown.approved = await approve(admin, shown.proposed.id, suffix);
    shown.audit = await audit(admin, shown.proposed.id, suffix);
    step(`approved and audited at ${suffix}`);
    seen[suffix] = shown;
  }
  return last;
}

await drive(run, seen, started, config.out, 'roles-failure.png');
