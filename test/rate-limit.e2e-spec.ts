import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';
import { bootTestApp, TestApp } from '@app/testing';

describe('per-key rate limiting, shared through Redis', () => {
  let t: TestApp;
  let other: TestApp;
  beforeAll(async () => {
    t = await bootTestApp(ApiModule, configureApp);
    // A second app instance stands in for a second api replica.
    other = await bootTestApp(ApiModule, configureApp);
  });
  afterAll(async () => {
    await t.admin('patch', '/v1/admin/plans/starter').send({ requestsPerMinute: 120 });
    await t.close();
    await other.close();
  });

  it('answers 429 rate_limited with an integer Retry-After once the plan limit is spent across replicas', async () => {
    await t.admin('patch', '/v1/admin/plans/starter').send({ requestsPerMinute: 5 }).expect(200);
    const a = await t.account({ plan: 'starter' });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const app = i % 2 === 0 ? t : other;
      const res = await app.http.get('/v1/models').set('Authorization', `Bearer ${a.key}`);
      statuses.push(res.status);
      expect(res.headers['ratelimit-limit']).toBe('5');
      expect(res.headers['ratelimit-remaining']).toBe(String(4 - i));
      expect(Number(res.headers['ratelimit-reset'])).toBeGreaterThanOrEqual(1);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    const limited = await other.http.get('/v1/models').set('Authorization', `Bearer ${a.key}`);
    expect(limited.status).toBe(429);
    expect(limited.body.error.code).toBe('rate_limited');
    expect(limited.headers['retry-after']).toMatch(/^\d+$/);
    const retryAfter = Number(limited.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(limited.headers['ratelimit-remaining']).toBe('0');

    // Another key of the same plan has its own budget.
    const b = await t.account({ plan: 'starter' });
    await t.http.get('/v1/models').set('Authorization', `Bearer ${b.key}`).expect(200);
  });
});
