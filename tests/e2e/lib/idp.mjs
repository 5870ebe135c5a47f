// A small GitHub-like identity provider for the browser tests: authorize, the token endpoint
// (checking PKCE and the client secret) and /user, in this process. lore is pointed at it with
// the LORE_GITHUB_* variables of `idpEnv`.
import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';

export const IDP_SECRET = 'stub-idp-client-secret';

/** The stub IdP: remembers each code's PKCE challenge and checks it at the token endpoint. */
export async function startIdp() {
  const codes = new Map();
  const calls = [];
  const srv = http.createServer(async (req, res) => {
    const url = new URL(req.url, 'http://idp');
    calls.push(`${req.method} ${url.pathname}`);
    if (url.pathname === '/login/oauth/authorize') {
      const code = randomBytes(12).toString('hex');
      codes.set(code, url.searchParams.get('code_challenge'));
      const back = new URL(url.searchParams.get('redirect_uri'));
      back.searchParams.set('code', code);
      back.searchParams.set('state', url.searchParams.get('state'));
      res.writeHead(302, { location: back.toString() });
      res.end();
      return;
    }
    if (url.pathname === '/login/oauth/access_token' && req.method === 'POST') {
      let body = '';
      for await (const chunk of req) body += chunk;
      const form = new URLSearchParams(body);
      const basic = Buffer.from((req.headers.authorization ?? '').replace(/^Basic /, ''), 'base64').toString();
      const challenge = codes.get(form.get('code'));
      const computed = createHash('sha256').update(form.get('code_verifier') ?? '').digest('base64url');
      res.setHeader('content-type', 'application/json');
      if (basic !== `gh-client:${IDP_SECRET}` || !challenge || challenge !== computed) {
        res.end(JSON.stringify({ error: 'bad_verification_code' }));
        return;
      }
      codes.delete(form.get('code'));
      res.end(JSON.stringify({ access_token: 'gho_stub', token_type: 'bearer', scope: 'read:user' }));
      return;
    }
    if (url.pathname === '/api/user' && req.headers.authorization === 'Bearer gho_stub') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ id: 583231, login: 'octocat', name: 'The Octocat', email: null }));
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${srv.address().port}`;
  return { base, calls, close: () => new Promise((r) => srv.close(r)) };
}

/** The environment that points lore serve's GitHub sign-in at `idp`. */
export function idpEnv(idp) {
  return {
    LORE_GITHUB_CLIENT_ID: 'gh-client',
    LORE_GITHUB_CLIENT_SECRET: IDP_SECRET,
    LORE_GITHUB_URL: idp.base,
    LORE_GITHUB_API_URL: `${idp.base}/api`,
  };
}
