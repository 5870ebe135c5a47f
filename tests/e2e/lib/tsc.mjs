// The real `tsc` (npm typescript, pinned in package-lock.json) over a few files.
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';

import { E2E_DIR, tempDir, cleanupDir } from './server.mjs';

/**
 * Writes `files` ({name: text}) to a temporary directory and runs `tsc --noEmit --strict`
 * (ES2022) over them: resolves {code, output}.
 */
export async function typecheck(files) {
  const work = await tempDir();
  try {
    for (const [name, text] of Object.entries(files)) await writeFile(path.join(work, name), text);
    const tsc = path.join(E2E_DIR, 'node_modules', 'typescript', 'bin', 'tsc');
    const args = [tsc, '--noEmit', '--strict', '--target', 'es2022', '--lib', 'es2022', '--pretty', 'false', ...Object.keys(files)];
    return await new Promise((resolve, reject) => {
      execFile(process.execPath, args, { cwd: work, timeout: 60_000 }, (error, stdout, stderr) => {
        if (error && typeof error.code !== 'number') return reject(error);
        resolve({ code: error ? error.code : 0, output: `${stdout}${stderr}` });
      });
    });
  } finally {
    await cleanupDir(work);
  }
}
