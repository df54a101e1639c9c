import { randomBytes, randomUUID } from 'node:crypto';
import type { Response } from 'supertest';
import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';
import {
  backstopDelayMs,
  DASHBOARD_AUTH_LIMITS,
  DashboardAuthLimits,
  DEFAULT_DASHBOARD_AUTH_LIMITS,
} from '../apps/api/src/dashboard/login-throttle.service';
import { buildConfig, KILN_CONFIG } from '@app/config';
import { ADMIN_TOKEN, bootTestApp, TestApp } from '@app/testing';

const PASSWORD = 'correct horse battery';
const FAILURES_PER_IP = 5;
const SESSION_LIMIT = 10;
const LIMITS: Required<DashboardAuthLimits> = {
  loginPerIp: 1000,
  loginFailuresPerEmailAndIp: 10,
  loginFailuresPerEmailPerHour: 100,
  signupPerIp: 1000,
  backstopDelayMs: 300,
  backstopMaxDelayMs: 1200,
};

/** A client address of its own per test (TRUST_PROXY=loopback believes X-Forwarded-For from the test). */
let lastOctet = 10;
const newIp = () => `203.0.113.${lastOctet++}`;
const from = (ip: string) => ({ 'X-Forwarded-For': ip });

function expect429(res: Response): void {
  expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status: 429, code: 'rate_limited' });
  expect(res.headers['retry-after']).toMatch(/^\d+$/);
  expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(3600);
}

describe('throttling failed authentication and busy sessions', () => {
  let t: TestApp;
  let overrides: Parameters<typeof bootTestApp>[2];
  beforeAll(async () => {
    const config = buildConfig({
      ...process.env,
      TRUST_PROXY: 'loopback',
      AUTH_FAILURES_PER_IP_PER_MINUTE: String(FAILURES_PER_IP),
      DASHBOARD_REQUESTS_PER_MINUTE: String(SESSION_LIMIT),
    });
    config.redisPrefix = `${config.redisPrefix}:auth-throttle-${randomBytes(4).toString('hex')}`;
    overrides = [
      [KILN_CONFIG, config],
      [DASHBOARD_AUTH_LIMITS, LIMITS],
    ];
    t = await bootTestApp(ApiModule, configureApp, overrides);
  });
  afterAll(() => t.close());

  const signup = async () => {
    const email = `th-${randomUUID()}@example.test`;
    const res = await t.http.post('/v1/dashboard/signup').send({ email, password: PASSWORD }).expect(201);
    return { email, token: res.body.token as string };
  };
  const login = (ip: string, email: string, password: string) => t.http.post('/v1/dashboard/login').set(from(ip)).send({ email, password });

  it('wrong API keys: 401 up to the per-address limit, then 429 before any key is looked at (even a valid one)', async () => {
    const a = await t.account();
    const ip = newIp();
    for (let i = 0; i < FAILURES_PER_IP; i++) {
      const res = await t.http
        .get('/v1/me')
        .set(from(ip))
        .set('Authorization', `Bearer kiln_live_${randomBytes(24).toString('hex')}`);
      expect(res.status).toBe(401);
    }
    expect429(
      await t.http
        .get('/v1/me')
        .set(from(ip))
        .set('Authorization', `Bearer kiln_live_${randomBytes(24).toString('hex')}`),
    );
    expect429(await t.http.get('/v1/me').set(from(ip)).set('Authorization', `Bearer ${a.key}`));
    // Other addresses are not affected, and a missing key (nothing to check) is not a failure.
    await t.http.get('/v1/me').set(from(newIp())).set('Authorization', `Bearer ${a.key}`).expect(200);
    const quiet = newIp();
    for (let i = 0; i < FAILURES_PER_IP + 2; i++) expect((await t.http.get('/v1/me').set(from(quiet))).status).toBe(401);
    await t.http.get('/v1/me').set(from(quiet)).set('Authorization', `Bearer ${a.key}`).expect(200);
  });

  it('a second api replica shares the count: it blocks the address at its own next failure', async () => {
    // Replicas block in memory an address their own count put over the limit; the count itself is in Redis.
    const second = await bootTestApp(ApiModule, configureApp, overrides);
    try {
      const a = await t.account();
      const ip = newIp();
      const wrong = () => `Bearer kiln_live_${randomBytes(24).toString('hex')}`;
      for (let i = 0; i < FAILURES_PER_IP; i++)
        expect((await t.http.get('/v1/me').set(from(ip)).set('Authorization', wrong())).status).toBe(401);
      expect429(await t.http.get('/v1/me').set(from(ip)).set('Authorization', `Bearer ${a.key}`));
      // The second replica has not refused this address yet: one more guess is looked up there,
      // and Redis's count (now past the limit) blocks the address on that replica too.
      await second.http.get('/v1/me').set(from(ip)).set('Authorization', `Bearer ${a.key}`).expect(200);
      expect((await second.http.get('/v1/me').set(from(ip)).set('Authorization', wrong())).status).toBe(401);
      expect429(await second.http.get('/v1/me').set(from(ip)).set('Authorization', `Bearer ${a.key}`));
    } finally {
      await second.close();
    }
  });

  it('wrong admin tokens: 401 up to the limit, then 429 even for the right token from that address', async () => {
    const ip = newIp();
    for (let i = 0; i < FAILURES_PER_IP; i++) {
      expect((await t.http.get('/v1/admin/plans').set(from(ip)).set('Authorization', 'Bearer not-the-admin-token-at-all')).status).toBe(
        401,
      );
    }
    expect429(await t.http.get('/v1/admin/plans').set(from(ip)).set('Authorization', 'Bearer not-the-admin-token-at-all'));
    expect429(await t.http.get('/v1/admin/plans').set(from(ip)).set('Authorization', `Bearer ${ADMIN_TOKEN()}`));
    await t.http.get('/v1/admin/plans').set(from(newIp())).set('Authorization', `Bearer ${ADMIN_TOKEN()}`).expect(200);
  });

  it('unknown session tokens: 401 up to the limit, then 429', async () => {
    const ip = newIp();
    for (let i = 0; i < FAILURES_PER_IP; i++) {
      expect((await t.http.get('/v1/dashboard/account').set(from(ip)).set('Authorization', 'Bearer kiln_sess_nope')).status).toBe(401);
    }
    expect429(await t.http.get('/v1/dashboard/account').set(from(ip)).set('Authorization', 'Bearer kiln_sess_nope'));
  });

  it('one session gets DASHBOARD_REQUESTS_PER_MINUTE requests, then 429; another session has its own budget', async () => {
    const holder = await signup();
    const session = { Authorization: `Bearer ${holder.token}` };
    for (let i = 0; i < SESSION_LIMIT; i++) {
      const res = await t.http.get('/v1/dashboard/account').set(session).expect(200);
      expect(res.headers['ratelimit-remaining']).toBe(String(SESSION_LIMIT - 1 - i));
    }
    expect429(await t.http.get('/v1/dashboard/account').set(session));
    const other = await login(newIp(), holder.email, PASSWORD).expect(200);
    await t.http.get('/v1/dashboard/account').set('Authorization', `Bearer ${other.body.token}`).expect(200);
  });

  it("a stranger's wrong passwords from one address do not lock the holder out of another", async () => {
    const victim = await signup();
    const stranger = newIp();
    for (let i = 0; i < LIMITS.loginFailuresPerEmailAndIp; i++) {
      expect((await login(stranger, victim.email, `wrong password ${i}`)).status).toBe(401);
    }
    expect429(await login(stranger, victim.email, 'wrong password again'));
    // Even the right password is refused from the stranger's address while its window lasts.
    expect429(await login(stranger, victim.email, PASSWORD));

    await login(newIp(), victim.email, PASSWORD).expect(200);
  });

  it("only failures count toward an email's limits, and a successful login clears its address's count", async () => {
    const holder = await signup();
    const ip = newIp();
    for (let i = 0; i < LIMITS.loginFailuresPerEmailAndIp - 1; i++) {
      expect((await login(ip, holder.email, 'mistyped password')).status).toBe(401);
    }
    await login(ip, holder.email, PASSWORD).expect(200);
    // Counted on, the success or the earlier failures would refuse the second of these.
    for (let i = 0; i < 5; i++) expect((await login(ip, holder.email, 'mistyped again')).status).toBe(401);
    await login(ip, holder.email, PASSWORD).expect(200);
  });

  it('a distributed guess (100 wrong passwords from 10 addresses) cannot lock the holder out: a fresh address signs in, slowed; the guessing addresses are refused', async () => {
    const victim = await signup();
    const guessers = Array.from({ length: 10 }, () => newIp());
    for (let i = 0; i < LIMITS.loginFailuresPerEmailPerHour; i++) {
      expect((await login(guessers[i % 10], victim.email, `guess ${i}`)).status).toBe(401);
    }
    // Past the backstop: each guessing address is refused, even with the right password.
    for (const ip of guessers.slice(0, 3)) expect429(await login(ip, victim.email, PASSWORD));

    // The holder, from an address that has not failed: signed in, after the backstop's wait.
    const started = Date.now();
    const signedIn = await login(newIp(), victim.email, PASSWORD).expect(200);
    expect(signedIn.body.token).toEqual(expect.any(String));
    expect(Date.now() - started).toBeGreaterThanOrEqual(LIMITS.backstopDelayMs - 20);

    // A new address buys one slowed guess: once it failed, it is refused for the hour, right password or not.
    const fresh = newIp();
    expect((await login(fresh, victim.email, 'another guess')).status).toBe(401);
    expect429(await login(fresh, victim.email, PASSWORD));
    // Another fresh address still signs in: the email itself is never locked.
    await login(newIp(), victim.email, PASSWORD).expect(200);
  });

  it('past the backstop the wait doubles every 10 further failures, up to its cap', () => {
    const { loginFailuresPerEmailPerHour: limit } = DEFAULT_DASHBOARD_AUTH_LIMITS;
    expect(backstopDelayMs(limit - 1, limit, 1000, 10_000)).toBe(0);
    expect(backstopDelayMs(limit, limit, 1000, 10_000)).toBe(1000);
    expect(backstopDelayMs(limit + 9, limit, 1000, 10_000)).toBe(1000);
    expect(backstopDelayMs(limit + 10, limit, 1000, 10_000)).toBe(2000);
    expect(backstopDelayMs(limit + 30, limit, 1000, 10_000)).toBe(8000);
    expect(backstopDelayMs(limit + 1_000_000, limit, 1000, 10_000)).toBe(10_000);
  });
});
