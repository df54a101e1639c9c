import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');

/**
 * openapi-typescript is ESM-only, so it runs as its own process. Request fields with a default
 * stay optional (`--default-non-nullable false`): the server fills them in, the client need not.
 */
export async function generateTypes(document: object): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-openapi-'));
  try {
    const input = path.join(dir, 'openapi.json');
    const output = path.join(dir, 'openapi.d.ts');
    fs.writeFileSync(input, JSON.stringify(document));
    await run(process.execPath, [path.join(ROOT, 'node_modules/openapi-typescript/bin/cli.js'), input, '-o', output, '--default-non-nullable', 'false'], { cwd: ROOT, timeout: 60_000 });
    return fs.readFileSync(output, 'utf8');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** `tsc --noEmit --strict` over the given files in a temporary folder; the compiler's output, or '' when clean. */
export async function typeCheck(files: Record<string, string>): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-tsc-'));
  try {
    for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text);
    const names = Object.keys(files).filter((n) => n.endsWith('.ts')).map((n) => path.join(dir, n));
    try {
      await run(
        process.execPath,
        [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '--noEmit', '--strict', '--target', 'ES2022', '--module', 'commonjs', '--lib', 'ES2022,DOM', '--types', 'node', '--typeRoots', path.join(ROOT, 'node_modules/@types'), ...names],
        { cwd: dir, timeout: 120_000 },
      );
      return '';
    } catch (err) {
      const { stdout, stderr } = err as { stdout?: string; stderr?: string };
      return `${stdout ?? ''}${stderr ?? ''}`.replaceAll(dir + path.sep, '') || String(err);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
