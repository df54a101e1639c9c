import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..');

/** libs/sdk is publishable on its own: no runtime dependency, its own build, exports that resolve. */
describe('@kiln/sdk package', () => {
  it('imports only its own files and node: built-ins (types from the generated file)', () => {
    const imports = fs
      .readdirSync(__dirname)
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'))
      .flatMap((f) => [...fs.readFileSync(path.join(__dirname, f), 'utf8').matchAll(/(?:from|import\()\s*'([^']+)'/g)].map((m) => `${f}: ${m[1]}`));
    expect(imports.filter((i) => !/: (\.\/|node:)/.test(i))).toEqual([]);
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    expect(pkg.dependencies ?? {}).toEqual({});
  });

  it('builds with its own tsconfig into a package whose exports load and carry types', () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-sdk-build-'));
    try {
      execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', path.join(ROOT, 'tsconfig.json'), '--outDir', path.join(out, 'dist')], { stdio: 'pipe', timeout: 120_000 });
      fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(out, 'package.json'));
      const pkg = JSON.parse(fs.readFileSync(path.join(out, 'package.json'), 'utf8'));
      const entry = path.join(out, pkg.exports['.'].default);
      expect(fs.existsSync(path.join(out, pkg.exports['.'].types))).toBe(true);
      expect(fs.existsSync(path.join(out, pkg.types))).toBe(true);
      const sdk = require(entry);
      expect(typeof sdk.Kiln).toBe('function');
      expect(typeof sdk.Kiln.verifyWebhook).toBe('function');
      expect(typeof sdk.KilnApiError).toBe('function');
      expect(fs.readFileSync(path.join(out, 'dist/index.d.ts'), 'utf8')).toContain('openapi.generated');
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  });
});
