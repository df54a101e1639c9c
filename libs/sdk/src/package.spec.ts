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
      .flatMap((f) =>
        [...fs.readFileSync(path.join(__dirname, f), 'utf8').matchAll(/(?:from|import\()\s*'([^']+)'/g)].map((m) => `${f}: ${m[1]}`),
      );
    expect(imports.filter((i) => !/: (\.\/|node:)/.test(i))).toEqual([]);
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    expect(pkg.dependencies ?? {}).toEqual({});
  });

  it('builds with its own build (tsc, then the generated declarations trimmed) into a package whose exports load and carry types', () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-sdk-build-'));
    try {
      execFileSync(process.execPath, [path.join(ROOT, 'build.js'), path.join(out, 'dist')], { stdio: 'pipe', timeout: 120_000 });
      fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(out, 'package.json'));
      const pkg = JSON.parse(fs.readFileSync(path.join(out, 'package.json'), 'utf8'));
      const entry = path.join(out, pkg.exports['.'].default);
      expect(fs.existsSync(path.join(out, pkg.exports['.'].types))).toBe(true);
      expect(fs.existsSync(path.join(out, pkg.types))).toBe(true);
      // The built package, loaded as a consumer's require() loads it (a path known at run time only).
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- see above
      const sdk = require(entry);
      expect(typeof sdk.Kiln).toBe('function');
      expect(typeof sdk.Kiln.verifyWebhook).toBe('function');
      expect(typeof sdk.KilnApiError).toBe('function');
      expect(fs.readFileSync(path.join(out, 'dist/index.d.ts'), 'utf8')).toContain('openapi.generated');
      // The declarations: the SDK's own, and of the generated OpenAPI types (over 500 kB in
      // src/) only the schemas the SDK's types reach; no source maps.
      const declarations = fs.readdirSync(path.join(out, 'dist')).filter((f) => f.endsWith('.d.ts'));
      const bytes = declarations.reduce((sum, f) => sum + fs.statSync(path.join(out, 'dist', f)).size, 0);
      expect(bytes).toBeLessThan(60_000);
      expect(fs.readdirSync(path.join(out, 'dist')).filter((f) => f.endsWith('.map'))).toEqual([]);
      const generated = fs.readFileSync(path.join(out, 'dist/openapi.generated.d.ts'), 'utf8');
      expect(generated).toContain('CreateBatchRequestDto: {');
      expect(generated).toContain('ErrorObjectDto: {'); // reached through ErrorResponseDto
      expect(generated).not.toMatch(/interface paths|interface operations|AdminModelDto|SignupRequestDto/);
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  });

  it('packs into a tarball that installs offline into another project and runs there: ESM, CommonJS and TypeScript', () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-sdk-pack-'));
    const run = (cmd: string, args: string[], cwd: string) =>
      execFileSync(cmd, args, {
        cwd,
        stdio: 'pipe',
        timeout: 180_000,
        env: { ...process.env, npm_config_update_notifier: 'false' },
      }).toString();
    try {
      // npm pack runs the package's prepack (its own tsc build) and lists what it packed.
      const packed = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work], ROOT))[0];
      const names: string[] = packed.files.map((f: { path: string }) => f.path);
      expect(names).toEqual(expect.arrayContaining(['README.md', 'index.mjs', 'dist/index.js', 'dist/index.d.ts', 'package.json']));
      expect(names.filter((n) => n.endsWith('.map') || (n.endsWith('.ts') && !n.endsWith('.d.ts')) || n.includes('spec'))).toEqual([]);

      const project = path.join(work, 'project');
      fs.mkdirSync(project);
      fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'uses-kiln', private: true }));
      // No dependencies: --offline with an empty cache of its own proves nothing is fetched.
      run(
        'npm',
        ['install', '--offline', '--cache', path.join(work, 'npm-cache'), '--no-audit', '--no-fund', path.join(work, packed.filename)],
        project,
      );

      // Both entry points load the same client; a call to a closed port fails as the SDK's own error.
      const probe = `
        const kiln = new Kiln({ baseUrl: 'http://127.0.0.1:9', apiKey: 'kiln_live_x', maxRetries: 0, timeoutMs: 5000 });
        kiln.me().then(() => { console.log('answered?'); process.exit(1); }, (err) => console.log(typeof Kiln.verifyWebhook, err instanceof KilnApiError, err.code));`;
      fs.writeFileSync(path.join(project, 'esm.mjs'), `import { Kiln, KilnApiError } from '@kiln/sdk';${probe}`);
      fs.writeFileSync(path.join(project, 'cjs.cjs'), `const { Kiln, KilnApiError } = require('@kiln/sdk');${probe}`);
      for (const file of ['esm.mjs', 'cjs.cjs'])
        expect(run(process.execPath, [file], project).trim()).toBe('function true connection_failed');

      // Its declarations type-check a client, and catch a wrong field.
      const client = `
        import { Kiln, KilnApiError, type BatchTier, type CreateBatchRequest, type BatchDetail } from '@kiln/sdk';
        const tier: BatchTier = 'economy';
        const body: CreateBatchRequest = { model: 'beta-2-lite', prompts: ['a fox'], seed: 42, outputFormat: 'webp', tier };
        export async function make(kiln: Kiln): Promise<string[]> {
          const { id } = await kiln.batches.create(body);
          const done: BatchDetail = await kiln.batches.wait(id);
          return done.tasks.flatMap((t) => t.resultUrls);
        }
        export const isKiln = (e: unknown) => e instanceof KilnApiError;`;
      const tsc = (source: string) => {
        fs.writeFileSync(path.join(project, 'client.ts'), source);
        try {
          run(
            process.execPath,
            [
              require.resolve('typescript/bin/tsc'),
              '--noEmit',
              '--strict',
              '--module',
              'node16',
              '--moduleResolution',
              'node16',
              '--target',
              'ES2022',
              '--types',
              'node',
              '--typeRoots',
              path.resolve(ROOT, '../../node_modules/@types'),
              'client.ts',
            ],
            project,
          );
          return '';
        } catch (err) {
          return String((err as { stdout?: Buffer }).stdout ?? err);
        }
      };
      expect(tsc(client)).toBe('');
      expect(tsc(client.replace("outputFormat: 'webp'", "outputFormat: 'gif'"))).toMatch(/gif/);
      expect(tsc(client.replace("= 'economy'", "= 'cheap'"))).toMatch(/cheap/);
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  }, 240_000);
});
