// Opens a page in headless Chromium (Debian's, driven by playwright-core),
// waits until it sets window.done, and prints its window.results as JSON.
// Usage: node run-page.mjs PAGE_URL [CHROMIUM]
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [url, executablePath = '/usr/bin/chromium'] = process.argv.slice(2);
const profile = mkdtempSync(join(tmpdir(), 'affinity-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await context.newPage();
  const logs = [];
  page.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => logs.push(`pageerror: ${e}`));
  await page.goto(url);
  await page.waitForFunction(() => window.done === true, null, { timeout: 30000 })
    .catch((e) => { throw new Error(`${e.message}\n${logs.join('\n')}`); });
  const results = await page.evaluate(() => window.results);
  // Give beacons queued by the page time to leave before the browser closes.
  await page.waitForTimeout(1000);
  console.log(JSON.stringify({ results, logs }));
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
