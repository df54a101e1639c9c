import { PassThrough } from 'node:stream';
import { progressReporter } from './progress';

function stream(isTTY: boolean): { out: () => string; s: NodeJS.WriteStream } {
  const s = new PassThrough() as unknown as NodeJS.WriteStream & { isTTY: boolean; columns: number };
  let text = '';
  (s as unknown as PassThrough).on('data', (d) => (text += d));
  s.isTTY = isTTY;
  s.columns = 120;
  return { out: () => text, s };
}

describe('progress on stderr', () => {
  it('not a terminal: one line per change, none for a repeat', () => {
    const { s, out } = stream(false);
    const p = progressReporter(s);
    p.update({ total: 25, finished: 0, failed: 0, credits: 30 });
    p.update({ total: 25, finished: 0, failed: 0, credits: 30 });
    p.update({ total: 25, finished: 10, failed: 1, credits: 27 });
    p.stop();
    expect(out()).toBe('images 0/25, failed 0, credits 30\nimages 10/25, failed 1, credits 27\n');
  });

  it('a terminal: a bar with images done / total, failed, credits and ETA', () => {
    const { s, out } = stream(true);
    const p = progressReporter(s);
    p.update({ total: 25, finished: 3, failed: 1, credits: 75 });
    p.update({ total: 25, finished: 25, failed: 1, credits: 72 });
    p.stop();
    expect(out()).toMatch(/25\/25 images \| failed 1 \| credits 72 \| ETA/);
    expect(out()).toMatch(/={40} 25\/25/); // the bar itself, full
  });
});
