import { execFile } from 'node:child_process';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { builtinFontRenders } from './builtin-fonts';

const run = promisify(execFile);

describe('builtinFontRenders', () => {
  it('sees real letters where DejaVu Sans is installed (this machine, the runtime image)', async () => {
    const result = await builtinFontRenders();
    expect(result).toMatchObject({ ok: true });
    expect(result.narrowPx * 2).toBeLessThan(result.widePx);
  });

  it('reports tofu when fontconfig finds no font (an image without fonts)', async () => {
    // A process of its own: fontconfig reads its configuration once per process.
    const dir = mkdtempSync(path.join(tmpdir(), 'kiln-nofonts-'));
    try {
      const conf = path.join(dir, 'fonts.conf');
      writeFileSync(conf, '<fontconfig></fontconfig>\n');
      const script = `require(${JSON.stringify(path.join(__dirname, 'builtin-fonts'))}).builtinFontRenders().then((r) => console.log(JSON.stringify(r)))`;
      const { stdout } = await run(process.execPath, ['-r', 'ts-node/register/transpile-only', '-e', script], {
        env: { ...process.env, FONTCONFIG_FILE: conf },
        timeout: 60_000,
      });
      expect(JSON.parse(stdout.trim().split('\n').pop() as string)).toMatchObject({ ok: false });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    // ts-node compiling in a fresh process takes seconds on a loaded two-core machine.
  }, 60_000);
});
