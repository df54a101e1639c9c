/**
 * Every provider type's fake upstream (FAKE_UPSTREAMS) in a process of its own, for the README
 * test (scripts/test-readme.sh): the routing snippets of README.md and docs/providers.md point
 * their routes at these instead of the vendors. Built with the rest (dist/libs/testing/...);
 * the production build leaves it out with libs/testing.
 *
 * argv[2]: a file to write. Once every fake listens: `{"baseUrls": {type: baseUrl}}`. On
 * SIGTERM, before it exits: the same with `"requests": {type: count}`, what each fake was sent.
 * It also ends when the script that started it is gone, so a killed test leaves no fakes behind.
 */
import { writeFileSync } from 'node:fs';
import type { FakeUpstream } from './fake-upstream';
import { FAKE_UPSTREAMS } from './fake-upstreams';

const out = process.argv[2];
if (!out) throw new Error('usage: docs-upstreams.main.js <state file>');

const fakes = Object.entries(FAKE_UPSTREAMS).flatMap(([type, make]) => (make ? [[type, make()] as [string, FakeUpstream]] : []));

async function main(): Promise<void> {
  const baseUrls = Object.fromEntries(await Promise.all(fakes.map(async ([type, fake]) => [type, await fake.start()] as const)));
  writeFileSync(out, JSON.stringify({ baseUrls }));
  process.on('SIGTERM', () => {
    const requests = Object.fromEntries(fakes.map(([type, fake]) => [type, fake.requests.length]));
    writeFileSync(out, JSON.stringify({ baseUrls, requests }));
    void Promise.all(fakes.map(([, fake]) => fake.stop())).finally(() => process.exit(0));
  });
}

const parent = process.ppid;
setInterval(() => {
  try {
    process.kill(parent, 0);
  } catch {
    process.exit(0);
  }
}, 1000).unref();

void main();
