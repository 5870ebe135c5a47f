// The operator routes of a Workers or Spin host the tests started: one client for both, and
// the `init` that bootstraps a fresh host.

/**
 * A client for `${base}/operator/{action}` with the operator secret. A refusal or an answer
 * that is not JSON (a host's plain-text error) throws with the status, the body as text and
 * the last 4 KB of the host's stderr (`stderr()`, read when it throws).
 */
export function operatorClient(base, secret, hostName, stderr) {
  return async function operator(action, body = {}) {
    const res = await fetch(`${base}/operator/${action}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (!res.ok || json === undefined) {
      throw new Error(`operator ${action} failed (${res.status}): ${text}\n${hostName} stderr (last 4 KB):\n${stderr().slice(-4096)}`);
    }
    return json;
  };
}

/**
 * Bootstraps a just-started host (operator `init` of the org `default`). If that fails, the
 * host is killed before the error is thrown: left running, its pipes would keep the test
 * process alive. `exited` resolves when the child has exited.
 */
export async function initOrStop(operator, child, exited) {
  try {
    return await operator('init', { org: 'default' });
  } catch (e) {
    child.kill('SIGKILL');
    await exited;
    throw e;
  }
}
