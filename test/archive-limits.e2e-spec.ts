import { buildConfig } from '@app/config';
import { BatchArchiveService } from '@app/batches';
import { bearer, createBatch, FileEnvironment, fileEnvironment, TestAccount, TestApp } from '@app/testing';
import { bootApi } from './helpers/apps';

jest.setTimeout(60_000);

describe('archive caps: ARCHIVE_MAX_CONCURRENT per api process, ARCHIVE_MAX_PER_ACCOUNT per account', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let archives: BatchArchiveService;

  beforeAll(async () => {
    const base = buildConfig(process.env);
    env = await fileEnvironment('archive_limits', { storage: { ...base.storage, archiveMaxConcurrent: 3, archiveMaxPerAccount: 2 } });
    api = await bootApi(env.config);
    archives = api.app.get(BatchArchiveService);
  });
  afterAll(async () => {
    await api?.close();
    await env?.teardown();
  });

  const get = (a: TestAccount, id: string) => api.http.get(`/v1/batches/${id}/archive`).set('Authorization', bearer(a));
  async function withBatch(): Promise<{ a: TestAccount; id: string }> {
    const a = await api.account();
    return { a, id: await createBatch(api, a, { model: 'eta-image', prompts: ['a fox'] }) };
  }

  it('past the per-account cap: 429 rate_limited with Retry-After; another account still gets its zip; a freed slot serves again', async () => {
    const { a, id } = await withBatch();
    // Two archives of this account being streamed (slots held as a slow client would hold them).
    const held = [await archives.open(a.id, id), await archives.open(a.id, id)];
    try {
      const refused = await get(a, id);
      expect({ status: refused.status, code: refused.body.error?.code }).toEqual({ status: 429, code: 'rate_limited' });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      const other = await withBatch();
      const zip = await get(other.a, other.id).expect(200);
      expect(zip.headers['content-type']).toBe('application/zip');
    } finally {
      held.forEach((h) => h.release());
    }
    await get(a, id).expect(200);
    expect(archives.inProgress).toBe(0);
  });

  it('past the per-process cap: 503 service_unavailable with Retry-After for anyone; 200 once one ends; a 404 takes no slot', async () => {
    const accounts = await Promise.all([withBatch(), withBatch(), withBatch()]);
    const held = await Promise.all(accounts.map(({ a, id }) => archives.open(a.id, id)));
    try {
      const fresh = await withBatch();
      const refused = await get(fresh.a, fresh.id);
      expect({ status: refused.status, code: refused.body.error?.code }).toEqual({ status: 503, code: 'service_unavailable' });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      // Someone else's batch is still not found first: the cap does not reveal it.
      expect((await get(fresh.a, accounts[0].id)).status).toBe(404);
      held[0].release();
      await get(fresh.a, fresh.id).expect(200);
    } finally {
      held.forEach((h) => h.release());
    }
    expect(archives.inProgress).toBe(0);
  });
});
