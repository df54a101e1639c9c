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
    await run(
      process.execPath,
      [path.join(ROOT, 'node_modules/openapi-typescript/bin/cli.js'), input, '-o', output, '--default-non-nullable', 'false'],
      { cwd: ROOT, timeout: 60_000 },
    );
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
    const names = Object.keys(files)
      .filter((n) => n.endsWith('.ts'))
      .map((n) => path.join(dir, n));
    try {
      await run(
        process.execPath,
        [
          path.join(ROOT, 'node_modules/typescript/bin/tsc'),
          '--noEmit',
          '--strict',
          '--target',
          'ES2022',
          '--module',
          'commonjs',
          '--lib',
          'ES2022,DOM',
          '--types',
          'node',
          '--typeRoots',
          path.join(ROOT, 'node_modules/@types'),
          ...names,
        ],
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

/**
 * `redocly lint` with its recommended rules over the document, offline: telemetry and the
 * update check are off, so the run makes no request to another host. Its JSON report's problems.
 */
export async function redoclyLint(document: object): Promise<{ ruleId: string; severity: string; message: string; location: unknown }[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-redocly-'));
  try {
    const input = path.join(dir, 'openapi.json');
    fs.writeFileSync(input, JSON.stringify(document));
    fs.writeFileSync(path.join(dir, 'redocly.yaml'), 'extends:\n  - recommended\n');
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
    const { stdout } = await run(
      process.execPath,
      [path.join(ROOT, 'node_modules/@redocly/cli/bin/cli.js'), 'lint', input, '--format', 'json'],
      {
        cwd: dir,
        env,
        timeout: 120_000,
        maxBuffer: 16 * 1024 * 1024,
      },
    ).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
    const report = JSON.parse(stdout) as { problems: { ruleId: string; severity: string; message: string; location: unknown }[] };
    return report.problems;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
