// Helpers for the OAuth end-to-end tests: headless Chromium (Debian's, driven by
// playwright-core) that signs in and consents on lore's real pages, an in-memory
// OAuthClientProvider for @modelcontextprotocol/sdk, a loopback redirect receiver, and an
// HTTPS server (self-signed certificate made with openssl) for client ID metadata documents.
import http from 'node:http';
import https from 'node:https';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, existsSync } from 'node:fs';
import path from 'node:path';

import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.LORE_CHROMIUM || '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
/** Where screenshots of the pages go, when set (never inside the repository). */
export const SHOTS = process.env.LORE_OAUTH_SHOTS || '';

export async function launchBrowser() {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium`);
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}

async function shot(page, name) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

/**
 * Opens `authorizationUrl` in a fresh browser context, signs in with the owner password if
 * asked, checks the consent page, and allows (or denies). Resolves the URL the browser was
 * redirected to (the client's callback) once it arrives.
 */
export async function signInAndConsent(browser, authorizationUrl, { password, org, write = true, deny = false, shotPrefix = '', callbackPrefix }) {
  const context = await browser.newContext({ viewport: { width: 900, height: 900 } });
  const page = await context.newPage();
  try {
    let landed = null;
    page.on('framenavigated', (frame) => {
      if (frame === page.mainFrame() && frame.url().startsWith(callbackPrefix)) landed = frame.url();
    });
    await page.goto(authorizationUrl.toString());
    if (new URL(page.url()).pathname === '/oauth/signin') {
      await page.getByRole('heading', { name: 'Sign in to lore' }).waitFor();
      await shot(page, `${shotPrefix}signin`);
      await page.getByLabel('Owner password').fill(password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL((u) => u.pathname === '/oauth/consent');
    }
    await page.getByRole('heading', { name: /^Allow .* to use lore\?$/ }).waitFor();
    await shot(page, `${shotPrefix}consent`);
    if (org) await page.getByRole('radio', { name: new RegExp(`^${org} `) }).check();
    if (!write) await page.getByRole('checkbox', { name: /^Write/ }).uncheck();
    await page.getByRole('button', { name: deny ? 'Deny' : 'Allow' }).click();
    await page.waitForURL((u) => u.toString().startsWith(callbackPrefix));
    return new URL(landed ?? page.url());
  } finally {
    await context.close();
  }
}

/** A loopback HTTP server that answers the OAuth redirect. */
export async function startCallbackServer() {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('lore e2e: authorization received');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}/callback`;
  return { url, close: () => new Promise((r) => server.close(r)) };
}

/** An HTTPS server on 127.0.0.1 with a fresh self-signed certificate; serves `routes`. */
export async function startHttpsServer(dir) {
  const key = path.join(dir, 'cimd-key.pem');
  const cert = path.join(dir, 'cimd-cert.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1', '-addext', 'basicConstraints=critical,CA:FALSE',
  ], { stdio: 'ignore' });
  const routes = new Map();
  const hits = new Map();
  const server = https.createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
    hits.set(req.url, (hits.get(req.url) ?? 0) + 1);
    const body = routes.get(req.url);
    if (!body) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=600' });
    res.end(JSON.stringify(body));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `https://127.0.0.1:${server.address().port}`;
  return { base, certFile: cert, routes, hits, close: () => new Promise((r) => server.close(r)) };
}

/**
 * An OAuthClientProvider kept in memory. `onRedirect(url)` is called when the SDK wants the
 * user sent to the authorization page; the test drives the browser there.
 */
export class MemoryProvider {
  constructor({ redirectUrl, clientMetadataUrl, name = 'lore e2e client', onRedirect }) {
    this._redirectUrl = redirectUrl;
    this.clientMetadataUrl = clientMetadataUrl;
    this._name = name;
    this._onRedirect = onRedirect;
    this._client = undefined;
    this._tokens = undefined;
    this._verifier = undefined;
    this._discovery = undefined;
    this.redirects = [];
  }
  get redirectUrl() { return this._redirectUrl; }
  get clientMetadata() {
    return {
      client_name: this._name,
      redirect_uris: [this._redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() { return this._client; }
  saveClientInformation(info) { this._client = info; }
  tokens() { return this._tokens; }
  saveTokens(tokens) { this._tokens = tokens; }
  async redirectToAuthorization(url) {
    this.redirects.push(url);
    await this._onRedirect?.(url);
  }
  saveCodeVerifier(v) { this._verifier = v; }
  codeVerifier() { return this._verifier; }
  saveDiscoveryState(state) { this._discovery = state; }
  discoveryState() { return this._discovery; }
  invalidateCredentials(scope) {
    if (scope === 'all' || scope === 'client') this._client = undefined;
    if (scope === 'all' || scope === 'tokens') this._tokens = undefined;
    if (scope === 'all' || scope === 'verifier') this._verifier = undefined;
  }
}
