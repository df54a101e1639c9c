import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const CLI = path.resolve(__dirname, '..');
const SDK = path.resolve(__dirname, '../../../libs/sdk');

/** The `kiln` command as its own package (@kiln/cli), installed from tarballs outside this repository. */
describe('@kiln/cli package', () => {
  it('packs with @kiln/sdk into tarballs that install into another project, whose `kiln` bin runs', () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-cli-pack-'));
    const env = { ...process.env, npm_config_update_notifier: 'false' };
    const run = (cmd: string, args: string[], cwd: string) => execFileSync(cmd, args, { cwd, stdio: 'pipe', timeout: 180_000, env }).toString();
    try {
      // Each prepack builds its package.
      const [sdk] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work], SDK));
      const [cli] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work], CLI));
      const names: string[] = cli.files.map((f: { path: string }) => f.path);
      expect(names).toEqual(expect.arrayContaining(['bin/kiln.js', 'dist/main.js', 'dist/submit.js', 'package.json']));
      expect(names.filter((n) => !/^(bin\/kiln\.js|dist\/[a-z.-]+\.js|package\.json)$/.test(n) || n.includes('spec'))).toEqual([]);

      const project = path.join(work, 'project');
      fs.mkdirSync(project);
      fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'uses-kiln-cli', private: true }));
      // The two tarballs need nothing else from the network but commander and cli-progress (and
      // cli-progress's string-width), which npm takes from its cache when it has them.
      run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', path.join(work, sdk.filename), path.join(work, cli.filename)], project);

      const kiln = (args: string[], extra: NodeJS.ProcessEnv = {}) =>
        spawnSync(path.join(project, 'node_modules/.bin/kiln'), args, { cwd: project, env: { ...env, ...extra }, encoding: 'utf8', timeout: 60_000 });
      const version = kiln(['--version']);
      expect({ code: version.status, out: version.stdout.trim() }).toEqual({ code: 0, out: '0.1.0' });
      // A real command through the installed SDK: nothing listens on port 9, so "cannot reach" (exit 1).
      const me = kiln(['me'], { KILN_URL: 'http://127.0.0.1:9', KILN_API_KEY: 'kiln_live_x' });
      expect(me.status).toBe(1);
      expect(me.stderr).toContain('cannot reach Kiln');
      const noKey = kiln(['me'], { KILN_API_KEY: '' });
      expect(noKey.status).toBe(2);
      expect(noKey.stderr).toContain('KILN_API_KEY');
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  }, 300_000);
});
