// The browser half of the conformance suite's `authorization-code-grant` scenario: the suite
// prints an authorization URL and waits for the redirect to its callback; this script reads
// that URL from the suite's log and signs in and consents on lore's pages in headless
// Chromium, as a person would.
//
//   node authorize.mjs <suite log> <callback URL prefix> <owner password>
import { readFileSync, existsSync } from 'node:fs';

import { launchBrowser, signInAndConsent } from '../e2e/lib/oauth.mjs';

const [log, callbackPrefix, password] = process.argv.slice(2);
const deadline = Date.now() + 60_000;
let url = null;
while (!url) {
  const text = existsSync(log) ? readFileSync(log, 'utf8') : '';
  const match = /^(https?:\/\/\S+\/oauth\/authorize\?\S+)$/m.exec(text);
  if (match) url = new URL(match[1]);
  else if (/=== SUMMARY ===/.test(text)) {
    console.error('authorize: the suite finished without asking for a browser sign-in');
    process.exit(0);
  } else if (Date.now() > deadline) {
    console.error(`authorize: no authorization URL in ${log} within 60 s`);
    process.exit(1);
  } else await new Promise((r) => setTimeout(r, 200));
}
const browser = await launchBrowser();
try {
  const landed = await signInAndConsent(browser, url, { password, callbackPrefix, shotPrefix: 'conformance-' });
  console.log(`authorize: signed in and allowed; redirected to ${landed.origin}${landed.pathname}`);
} finally {
  await browser.close();
}
