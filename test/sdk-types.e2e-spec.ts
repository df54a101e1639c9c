import * as fs from 'node:fs';
import * as path from 'node:path';
import { bootTestApp, TestApp } from '@app/testing';
import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';
import { generateTypes } from './helpers/openapi-typescript';

const GENERATED = path.resolve(__dirname, '../libs/sdk/src/openapi.generated.ts');

jest.setTimeout(120_000);

/**
 * The SDK's request and response types are generated from the document the api serves and
 * checked in. When a route or DTO changes, this fails until they are regenerated:
 * `npm run sdk:types` (this spec with KILN_UPDATE_SDK_TYPES=1, which rewrites the file).
 */
describe('SDK types', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await bootTestApp(ApiModule, configureApp);
  });
  afterAll(() => t.close());

  it('libs/sdk/src/openapi.generated.ts is what openapi-typescript makes of the current document', async () => {
    const doc = (await t.http.get('/v1/openapi.json').expect(200)).body;
    const fresh = await generateTypes(doc);
    if (process.env.KILN_UPDATE_SDK_TYPES === '1') fs.writeFileSync(GENERATED, fresh);
    const current = fs.existsSync(GENERATED) ? fs.readFileSync(GENERATED, 'utf8') : '';
    // A plain equality: jest's diff then names the first line that drifted.
    expect(current === fresh ? 'up to date' : `out of date: run npm run sdk:types\n${firstDifference(current, fresh)}`).toBe('up to date');
  });
});

function firstDifference(a: string, b: string): string {
  const x = a.split('\n');
  const y = b.split('\n');
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if (x[i] !== y[i]) return `line ${i + 1}:\n  checked in: ${x[i] ?? '(end of file)'}\n  generated:  ${y[i] ?? '(end of file)'}`;
  }
  return '';
}
