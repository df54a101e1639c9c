import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

const CLI = path.resolve(__dirname, '..');
const SDK = path.resolve(__dirname, '../../../libs/sdk');

/** The `kiln` command as its own package (@kiln/cli), installed from tarballs outside this repository. */
describe('@kiln/cli package', () => {
  it('packs with @kiln/sdk into tarballs that install into another project, whose `kiln` bin runs', async () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-cli-pack-'));
    const env = { ...process.env, npm_config_update_notifier: 'false' };
    const run = (cmd: string, args: string[], cwd: string) =>
      execFileSync(cmd, args, { cwd, stdio: 'pipe', timeout: 180_000, env }).toString();
    try {
      // Each prepack builds its package.
      const [sdk] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work], SDK));
      const [cli] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work], CLI));
      const names: string[] = cli.files.map((f: { path: string }) => f.path);
      // The prompts-file lib (libs/prompts-file) is compiled in, as dist/prompts-file/: no package of its own.
      expect(names).toEqual(
        expect.arrayContaining([
          'bin/kiln.js',
          'dist/main.js',
          'dist/submit.js',
          'dist/mcp/mcp.server.js',
          'dist/prompts-file/index.js',
          'dist/prompts-file/prompts-file.js',
          'package.json',
        ]),
      );
      expect(
        names.filter((n) => !/^(bin\/kiln\.js|dist\/(prompts-file\/|mcp\/)?[a-z.-]+\.js|package\.json)$/.test(n) || n.includes('spec')),
      ).toEqual([]);

      const project = path.join(work, 'project');
      fs.mkdirSync(project);
      fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'uses-kiln-cli', private: true }));
      // No network and no cache state: the CLI's own dependencies (commander, cli-progress and
      // theirs) are packed from this repository's node_modules, the versions its lock pins, and
      // everything installs --offline with an empty cache of the test's own (a dependency
      // missing here fails with ENOTCACHED instead of being fetched).
      const deps = runtimeClosure(CLI).map((dir) =>
        path.join(work, JSON.parse(run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', work], dir))[0].filename),
      );
      expect(deps.map((d) => path.basename(d))).toEqual(expect.arrayContaining(['commander-14.0.3.tgz', 'cli-progress-3.12.0.tgz']));
      const cache = path.join(work, 'npm-cache');
      run(
        'npm',
        [
          'install',
          '--offline',
          '--cache',
          cache,
          '--no-audit',
          '--no-fund',
          path.join(work, sdk.filename),
          path.join(work, cli.filename),
          ...deps,
        ],
        project,
      );

      const kiln = (args: string[], extra: NodeJS.ProcessEnv = {}) =>
        spawnSync(path.join(project, 'node_modules/.bin/kiln'), args, {
          cwd: project,
          env: { ...env, ...extra },
          encoding: 'utf8',
          timeout: 60_000,
        });
      const version = kiln(['--version']);
      expect({ code: version.status, out: version.stdout.trim() }).toEqual({ code: 0, out: '0.1.0' });
      // A real command through the installed SDK: nothing listens on port 9, so "cannot reach" (exit 1).
      const me = kiln(['me'], { KILN_URL: 'http://127.0.0.1:9', KILN_API_KEY: 'kiln_live_x' });
      expect(me.status).toBe(1);
      expect(me.stderr).toContain('cannot reach Kiln');
      // The prompts-file lib from the package: it reads the file before any request, and its
      // refusal is a usage error (exit 2) naming the line.
      fs.writeFileSync(path.join(project, 'p.jsonl'), '"a fox"\n{"prompt": "a hare", "tier": "cheap"}\n');
      const badLine = kiln(['submit', 'p.jsonl', '--model', 'm'], { KILN_URL: 'http://127.0.0.1:9', KILN_API_KEY: 'kiln_live_x' });
      expect({ code: badLine.status, err: badLine.stderr.trim() }).toEqual({
        code: 2,
        err: 'kiln: p.jsonl:2: "tier" must be "standard" or "economy"',
      });
      const noKey = kiln(['me'], { KILN_API_KEY: '' });
      expect(noKey.status).toBe(2);
      expect(noKey.stderr).toContain('KILN_API_KEY');
      // `kiln mcp` from the package, which bundles the MCP SDK and zod (apps/cli/build.js) rather
      // than depend on them: an agent's client lists the tools, and a call reaching no Kiln is a
      // tool error.
      const client = new Client({ name: 'package-spec', version: '1.0.0' });
      await client.connect(
        new StdioClientTransport({
          command: path.join(project, 'node_modules/.bin/kiln'),
          args: ['mcp'],
          cwd: project,
          env: { PATH: process.env.PATH ?? '', KILN_URL: 'http://127.0.0.1:9', KILN_API_KEY: 'kiln_live_x' },
          stderr: 'ignore',
        }),
      );
      try {
        expect((await client.listTools()).tools.map((t) => t.name)).toContain('generate_images');
        const models = (await client.callTool({ name: 'list_models', arguments: {} })) as CallToolResult;
        expect(models.isError).toBe(true);
        expect(JSON.stringify(models.content)).toContain('connection_failed');
      } finally {
        await client.close();
      }
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  }, 300_000);
});

/**
 * The folders of a package's runtime dependencies, and theirs, as Node resolves them from the
 * package up through this repository's node_modules (@kiln/sdk excluded: it is packed itself).
 */
function runtimeClosure(pkgDir: string): string[] {
  const found = new Map<string, string>();
  const visit = (dir: string) => {
    const { dependencies = {} } = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
    for (const name of Object.keys(dependencies).filter((n) => n !== '@kiln/sdk')) {
      let at = dir;
      let hit: string | undefined;
      for (;;) {
        const candidate = path.join(at, 'node_modules', name);
        if (fs.existsSync(path.join(candidate, 'package.json'))) {
          hit = candidate;
          break;
        }
        if (path.dirname(at) === at) throw new Error(`${name} (a dependency of ${dir}) is not installed: npm ci first`);
        at = path.dirname(at);
      }
      const key = fs.realpathSync(hit);
      if (!found.has(key)) {
        found.set(key, hit);
        visit(hit);
      }
    }
  };
  visit(pkgDir);
  return [...found.values()];
}
