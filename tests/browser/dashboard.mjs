// Walks the dashboard of a running `affinity serve` in headless Chromium
// (Debian's, driven by playwright-core): logs in, opens every page, acts on
// the explorer, the strategy editor, the events debugger, the key
// visualizer and the trends map, writes a screenshot of each page, and
// prints what it saw as JSON for crates/http/tests/browser.rs to check.
// Usage: node dashboard.mjs BASE_URL APP ADMIN_KEY SEEDED_USER OUT_DIR [CHROMIUM]
import { chromium } from 'playwright-core';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, app, key, seeded, out, executablePath = '/usr/bin/chromium'] = process.argv.slice(2);
mkdirSync(out, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), 'affinity-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath,
  headless: true,
  viewport: { width: 1280, height: 860 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const results = { errors: [], urls: [], pages: {} };
try {
  const page = await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') results.errors.push(`${page.url()}: ${m.text()}`); });
  page.on('pageerror', (e) => results.errors.push(`${page.url()}: pageerror: ${e}`));
  page.on('request', (r) => results.urls.push(r.url()));
  const shot = async (name) => page.screenshot({ path: join(out, `${name}.png`) });
  const data = (sel, attr) => page.$eval(sel, (el, a) => el.dataset[a], attr);
  const go = async (hash) => {
    await page.evaluate((h) => { location.hash = h; }, hash);
  };

  await page.goto(`${base}/dashboard/`);
  // A wrong key is refused with a message, and nothing else is shown.
  await page.fill('#login-app', app);
  await page.fill('#login-key', 'not-the-key');
  await page.press('#login-key', 'Enter');
  await page.waitForFunction(() => document.querySelector('#login-error').textContent !== '');
  results.wrongKey = { message: await page.textContent('#login-error'), navHidden: await page.$eval('#nav', (n) => n.hidden) };
  // The browser logs the refused request's status as a console error:
  // expected here only.
  results.errors = results.errors.filter((e) => !/status of 40[13]/.test(e));
  await page.fill('#login-key', key);
  await page.press('#login-key', 'Enter');

  // 1. Overview, under traffic the page itself sends (events, one in ten
  // rejected, and profile reads), so the rates have something to show.
  await page.evaluate(({ app, key }) => {
    const headers = { 'X-Algolia-Application-Id': app, 'X-Algolia-API-Key': key };
    let n = 0;
    // Capped, so the events debugger's ring (1000 per application)
    // keeps the seeded user's events.
    window.trafficTimer = setInterval(() => {
      if (n >= 300) return;
      n += 1;
      const event = { eventType: n % 10 ? 'click' : 'buy', eventName: 'Product Clicked', index: 'products', userToken: 'dash-overview', objectIDs: [`p${1 + (n % 12)}`] };
      fetch('/1/events', { method: 'POST', headers, body: JSON.stringify({ events: [event] }) });
      fetch('/1/profiles/personalization/seeded-alice', { headers });
    }, 100);
  }, { app, key });
  await page.waitForFunction(() => Number(document.querySelector('#page').dataset.samples || 0) >= 5, null, { timeout: 30000 });
  await page.evaluate(() => clearInterval(window.trafficTimer));
  // The deliberate 422s are logged by the browser: expected here only.
  results.errors = results.errors.filter((e) => !e.includes('status of 422'));
  results.pages.overview = {
    accepted: Number((await page.textContent('#m-accepted')).replace(/,/g, '')),
    reads: Number((await page.textContent('#m-reads')).replace(/,/g, '')),
    reasons: await page.$$eval('#reasons tr[data-reason]', (rs) => rs.map((r) => r.dataset.reason)),
    tables: await page.$$eval('#tables tbody tr', (rows) => rows.map((r) => r.cells[0].textContent)),
    sessionKey: await page.evaluate(() => sessionStorage.getItem('affinity.dashboard.login')?.includes('"key"')),
  };
  await shot('overview');
  // Keyboard: from the page's first stop (the skip link), Tab reaches
  // the navigation.
  await page.focus('.skip');
  await page.keyboard.press('Tab');
  results.pages.overview.focused = await page.evaluate(() => document.activeElement?.textContent);

  // 2. Explorer: the seeded user's bars, then one bar's explanation.
  await go(`#/explorer/${encodeURIComponent(seeded)}`);
  await page.waitForSelector('#profile button.bar');
  const bars = await page.$$eval('#profile button.bar', (bs) => bs.map((b) => [b.dataset.facet, b.dataset.value, Number(b.dataset.score)]));
  await page.focus('#profile button.bar');
  await page.keyboard.press('Enter');
  await page.waitForSelector('[data-explained-score]');
  await page.waitForSelector('#rerank table');
  await page.waitForSelector('#timeline ul');
  results.pages.explorer = {
    bars,
    explained: { facet: bars[0][0], value: bars[0][1], score: Number(await data('[data-explained-score]', 'explainedScore')) },
    filters: await page.$$eval('#filters .chip', (cs) => cs.map((c) => c.textContent)),
    rerankRows: await page.$$eval('#rerank tbody tr', (rs) => rs.length),
    timeline: await page.$$eval('#timeline li', (ls) => ls.length),
    users: await page.$$eval('#users button', (bs) => bs.map((b) => b.dataset.user)),
  };
  await shot('explorer');

  // 3. Strategy: the preview's bars before and after moving a slider.
  await go('#/strategy');
  await page.waitForFunction(() => Number(document.querySelector('#page').dataset.previews || 0) >= 1, null, { timeout: 20000 });
  const previewBars = () => page.$$eval('.pv-user .bar', (bs) => bs.map((b) => `${b.dataset.user} ${b.dataset.facet}:${b.dataset.value}=${b.dataset.candidate}`));
  const before = await previewBars();
  const sliders = await page.$$eval('input[type=range]', (is) => is.map((i) => i.getAttribute('aria-label')));
  // The second facet down to 0: its values leave every profile.
  const target = page.locator('input[data-slider="fa:1"]');
  await target.focus();
  await page.keyboard.press('Home');
  await page.waitForFunction(() => Number(document.querySelector('#page').dataset.previews) >= 2, null, { timeout: 20000 });
  await page.waitForTimeout(500);
  results.pages.strategy = { sliders, before, after: await previewBars(), saved: await page.textContent('#saved') };

  // 3b. The A/B test panel, by keyboard where it matters: a share sum of
  // 90 shows the server's message and stores nothing; the fixed test
  // (control, and a variant with the sliders' strategy) is saved; profile
  // reads of known users show as served counts; stopping it (confirmed)
  // restores plain answers.
  const abUsers = Array.from({ length: 40 }, (_, i) => `user-${String(i).padStart(3, '0')}`);
  const call = (path, method = 'GET') => page.evaluate(async ({ app, key, path, method }) => {
    const r = await fetch(path, { method, headers: { 'X-Algolia-Application-Id': app, 'X-Algolia-API-Key': key } });
    return { status: r.status, header: r.headers.get('x-affinity-variant'), body: await r.json() };
  }, { app, key, path, method });
  await page.waitForSelector('#ab-new');
  await page.focus('#ab-new');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#ab-form');
  const abForm = await page.$$eval('#ab-form [data-row]', (rows) => rows.map((r) => ({
    name: r.querySelector('[data-field="name"]').value,
    share: r.querySelector('[data-field="share"]').value,
    kind: r.querySelector('[data-field="kind"]').value,
  })));
  await page.fill('[data-row="1"] [data-field="share"]', '40');
  const badTotal = await page.textContent('#ab-total');
  await page.focus('#ab-save');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('#ab-error').textContent !== '');
  // The deliberate refusal (a 4xx) is logged by the browser: expected here only.
  results.errors = results.errors.filter((e) => !/status of 4(00|22)/.test(e));
  const bad = { message: await page.textContent('#ab-error'), total: badTotal, stored: (await call('/1/strategies/personalization/variants')).body };
  await page.fill('[data-row="1"] [data-field="share"]', '50');
  await page.focus('#ab-save');
  await page.keyboard.press('Enter');
  await page.waitForSelector('.ab-table tr[data-variant]');
  const saved = (await call('/1/strategies/personalization/variants')).body;
  const answered = {};
  for (const user of abUsers) answered[user] = (await call(`/1/profiles/personalization/${user}`)).body.variant;
  // The panel's next polls show every read.
  await page.waitForFunction((n) => [...document.querySelectorAll('tr[data-variant]')]
    .reduce((sum, r) => sum + Number(r.dataset.served || 0), 0) >= n, abUsers.length, { timeout: 20000 });
  const panel = await page.$$eval('tr[data-variant]', (rows) => rows.map((r) => ({
    name: r.dataset.variant,
    configured: Number(r.dataset.configured),
    served: Number(r.dataset.served),
    servedText: r.querySelector('[data-cell="served"]').textContent,
    share: r.querySelector('[data-cell="share"]').textContent,
    strategy: r.cells[1].textContent,
  })));
  const stats = (await call('/1/dashboard/stats')).body.variantsServed;
  await page.locator('#ab').scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(out, 'strategy.png'), fullPage: true });
  await page.focus('#ab-stop');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#ab-stop-yes');
  const confirmFocused = await page.evaluate(() => document.activeElement?.id);
  await page.keyboard.press('Enter');
  await page.waitForSelector('#ab-new');
  const plain = await call(`/1/profiles/personalization/${abUsers[0]}`);
  results.pages.variants = {
    users: abUsers, form: abForm, bad, saved, answered, panel, stats, confirmFocused,
    stopped: { variants: (await call('/1/strategies/personalization/variants')).body, header: plain.header, variant: plain.body.variant ?? null, status: await page.textContent('#ab-status') },
  };

  // 4. Events: live, a rejected event appears with its reason; filtered.
  await go('#/events');
  await page.waitForFunction(() => Number(document.querySelector('#page').dataset.rows || 0) >= 1, null, { timeout: 20000 });
  const rowsBefore = Number(await data('#page', 'rows'));
  await page.evaluate(async ({ app, key }) => {
    await fetch('/1/events', {
      method: 'POST',
      headers: { 'X-Algolia-Application-Id': app, 'X-Algolia-API-Key': key },
      body: JSON.stringify({ events: [{ eventType: 'buy', eventName: 'Dashboard Test', index: 'products', userToken: 'dash-live', objectIDs: ['p1'] }] }),
    });
  }, { app, key });
  await page.waitForSelector('#rows tr[data-status="rejected"]', { timeout: 30000 });
  // The deliberate 422 is logged by the browser: expected here only.
  results.errors = results.errors.filter((e) => !e.includes('status of 422'));
  const live = await page.$eval('#rows tr[data-status="rejected"]', (r) => r.textContent);
  await page.selectOption('#f-status', 'rejected');
  await page.click('#filter button[type=submit]');
  await page.waitForFunction(() => [...document.querySelectorAll('#rows tr')].every((r) => r.dataset.status === 'rejected'));
  results.pages.events = { rowsBefore, live, filtered: await page.$$eval('#rows tr', (rs) => rs.map((r) => r.dataset.status)) };
  await shot('events');

  // 5. Key visualizer: per table, the brightest range of each slot.
  await go('#/keys');
  await page.waitForSelector('section[data-table] rect');
  results.pages.keys = await page.$$eval('section[data-table]', (sections) => sections.map((s) => {
    const columns = {};
    for (const r of s.querySelectorAll('rect')) {
      const v = Number(r.dataset.value);
      const c = columns[r.dataset.slot];
      if (v > 0 && (!c || v > c.value)) columns[r.dataset.slot] = { value: v, from: r.dataset.from, to: r.dataset.to };
    }
    return { table: s.dataset.table, columns: Object.values(columns) };
  }));
  await page.locator('section[data-table^="profiles."]').scrollIntoViewIfNeeded();
  await shot('keys');

  // 6. Trends: the map's busiest area, chosen.
  await go('#/trends');
  await page.waitForFunction(() => document.querySelector('#page').dataset.counted === '1', null, { timeout: 30000 });
  const busiest = await page.$$eval('.cell', (cs) => cs.reduce((best, c, i) => (Number(c.dataset.events) > best.events ? { i, events: Number(c.dataset.events) } : best), { i: -1, events: 0 }));
  if (busiest.i >= 0) {
    await page.focus(`.cell[data-cell="${busiest.i}"]`);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#tr-area .bar');
  }
  results.pages.trends = { busiest, values: await page.$$eval('#tr-area .bar', (bs) => bs.map((b) => `${b.dataset.facet}:${b.dataset.value}`)) };
  await shot('trends');

  // A phone's width: nothing wider than the screen.
  await page.setViewportSize({ width: 390, height: 844 });
  const widths = {};
  for (const hash of ['#/overview', `#/explorer/${encodeURIComponent(seeded)}`, '#/strategy', '#/events', '#/keys', '#/trends']) {
    await go(hash);
    await page.waitForTimeout(1500);
    widths[hash] = await page.evaluate(() => document.documentElement.scrollWidth);
    if (hash === '#/strategy') {
      // The A/B test's form too (left unsaved).
      await page.click('#ab-new');
      await page.waitForSelector('#ab-form');
      await page.click('#ab-add');
      widths['#/strategy A/B form'] = await page.evaluate(() => document.documentElement.scrollWidth);
      await page.click('#ab-cancel');
    }
  }
  results.phone = { viewport: 390, widths };
  await go(`#/explorer/${encodeURIComponent(seeded)}`);
  await page.waitForSelector('#profile button.bar');
  await shot('explorer-phone');
  await go('#/overview');
  await page.waitForTimeout(500);
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(results));
