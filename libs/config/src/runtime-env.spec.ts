import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { useRuntimeEnv } from './runtime-env';

describe('useRuntimeEnv', () => {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'kiln-runtime-')), 'runtime.env');
  writeFileSync(file, 'DATABASE_URL=postgres://postgres@127.0.0.1:54329/kiln\nREDIS_URL=redis://127.0.0.1:6380\nADMIN_TOKEN=nope\n');

  it('fills the connection settings npm start used, and nothing else', () => {
    const env: Record<string, string | undefined> = {};
    expect(useRuntimeEnv(env, file)).toEqual(['DATABASE_URL', 'REDIS_URL']);
    expect(env).toEqual({ DATABASE_URL: 'postgres://postgres@127.0.0.1:54329/kiln', REDIS_URL: 'redis://127.0.0.1:6380' });
  });

  it('never overrides what the environment sets', () => {
    const env: Record<string, string | undefined> = { DATABASE_URL: 'postgres://elsewhere/kiln' };
    expect(useRuntimeEnv(env, file)).toEqual(['REDIS_URL']);
    expect(env.DATABASE_URL).toBe('postgres://elsewhere/kiln');
  });

  it('does nothing without the file', () => {
    const env: Record<string, string | undefined> = {};
    expect(useRuntimeEnv(env, path.join(tmpdir(), 'no-such-kiln-runtime.env'))).toEqual([]);
    expect(env).toEqual({});
  });
});
