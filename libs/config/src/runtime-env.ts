import { readFileSync } from 'node:fs';
import * as path from 'node:path';

/**
 * Written by `npm start` (scripts/start.sh) with the services it actually runs on: an
 * embedded PostgreSQL or a private redis-server when the defaults do not answer. Commands
 * typed in another terminal (the CLI's `demo`) read it, so they find the same database.
 */
export const RUNTIME_ENV_FILE = path.join('.kiln', 'runtime.env');
/** Only the connection settings: anything else in the file is ignored. */
const CARRIED = ['DATABASE_URL', 'REDIS_URL', 'REDIS_PREFIX'];

/**
 * Fills `env` from the runtime file for each connection variable `env` does not set itself
 * (an explicit setting always wins). Returns the names it filled. No file: nothing.
 */
export function useRuntimeEnv(env: Record<string, string | undefined> = process.env, file = RUNTIME_ENV_FILE): string[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const filled: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^([A-Z_]+)=(.*)$/.exec(line.trim());
    if (!m || !CARRIED.includes(m[1]) || (env[m[1]] !== undefined && env[m[1]] !== '')) continue;
    env[m[1]] = m[2];
    filled.push(m[1]);
  }
  return filled;
}
