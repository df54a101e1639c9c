import { createHash } from 'node:crypto';
import type Redis from 'ioredis';

/**
 * A Lua script called by its SHA1 (EVALSHA). EVAL sends the whole body on every call and Redis
 * hashes it each time to find its compiled copy: the route pacer's two scripts were about 4.5 KB
 * per task on the generator's connection. Redis forgets scripts on a restart or SCRIPT FLUSH; the
 * NOSCRIPT answer then gets the body once with EVAL, which caches it again.
 */
export class RedisScript {
  readonly sha: string;

  constructor(readonly lua: string) {
    this.sha = createHash('sha1').update(lua).digest('hex');
  }

  async run(client: Redis, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    try {
      return await client.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!isNoScript(err)) throw err;
      return client.eval(this.lua, keys.length, ...keys, ...args);
    }
  }
}

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}
