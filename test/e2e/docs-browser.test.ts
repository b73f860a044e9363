import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type GatewayProcess } from '../support/gateway-process.ts';

/** Debian's `chromium` package; Playwright's own browser downloads are not used. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
if (!available) {
  const message = `${CHROMIUM} not found: the /docs browser check needs Debian's chromium (apt-get install -y chromium)`;
  if (process.env.REQUIRE_BROWSER === '1') throw new Error(`REQUIRE_BROWSER=1 but ${message}`);
  console.warn(`\n!!! SKIPPED: ${message}\n`);
}

/** The summary of every operation in the OpenAPI document: the page must show them all. */
const OPERATIONS = ['Log in as an admin', 'Log out', 'List your sessions', 'End one of your sessions', 'Change your password', 'Create an API key', 'List API keys', 'Revoke an API key', 'List audit events'];

describe.skipIf(!available)('/docs renders the API reference in a browser (headless Chromium)', () => {
  let gateway: GatewayProcess;
  let browser: Browser;

  beforeAll(async () => {
    gateway = await startGateway();
    // Root in CI containers: Chromium's sandbox needs user namespaces it may not get.
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await gateway?.stop();
  });

  it('shows every operation, loads nothing from outside the gateway, and is screenshotted', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const outside: string[] = [];
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    // Anything the page asks of another origin (a CDN, fonts, telemetry) is recorded and refused.
    await page.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith(gateway.url) || url.startsWith('data:') || url.startsWith('blob:')) return route.continue();
      outside.push(url);
      return route.abort();
    });

    const response = await page.goto(`${gateway.url}/docs`);
    expect(response?.status()).toBe(200);
    expect(page.url()).toBe(`${gateway.url}/docs/`);
    for (const summary of OPERATIONS) await expect.poll(() => page.getByText(summary).first().isVisible(), { timeout: 20_000 }).toBe(true);
    await expect.poll(() => page.getByText('Gatehouse').first().isVisible()).toBe(true);

    const file = join(mkdtempSync(join(tmpdir(), 'gatehouse-docs-')), 'docs.png');
    await page.screenshot({ path: file, fullPage: false });
    const png = readFileSync(file);
    expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
    expect(png.length).toBeGreaterThan(20_000);
    console.info(`/docs screenshot: ${file}`);

    expect(outside).toEqual([]);
    expect(errors).toEqual([]);
  }, 60_000);
});
