import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';
import { DASHBOARD_AUTH_LIMITS } from '../apps/api/src/dashboard/login-throttle.service';
import { buildConfig, KILN_CONFIG } from '@app/config';
import { bootTestApp, TestApp } from '@app/testing';

/*
 * What the api does for the web app (docs/web.md): it serves the built app at /app/ with its
 * security headers, redirects / there, and signs the app in with an HttpOnly cookie whose
 * writes must carry X-Kiln-Session (CSRF). A built app is faked by a folder of two files, so
 * this runs without `npm run build`.
 */
const PASSWORD = 'correct horse battery';
const COOKIE_MODE = { 'X-Kiln-Session': 'cookie' };

describe('web app: static files, headers, cookie sessions (docs/web.md)', () => {
  let t: TestApp;
  let webDir: string;

  beforeAll(async () => {
    webDir = mkdtempSync(path.join(tmpdir(), 'kiln-web-'));
    writeFileSync(path.join(webDir, 'index.html'), '<!doctype html><title>Kiln</title><div id="app"></div>');
    mkdirSync(path.join(webDir, 'assets'));
    writeFileSync(path.join(webDir, 'assets', 'index-abc123.js'), 'console.log("kiln")');
    const config = buildConfig({ ...process.env, WEB_APP_DIR: webDir, PUBLIC_BASE_URL: 'http://files.example.test:8080' });
    config.redisPrefix = `${config.redisPrefix}:web-${randomBytes(4).toString('hex')}`;
    t = await bootTestApp(ApiModule, configureApp, [
      [KILN_CONFIG, config],
      [
        DASHBOARD_AUTH_LIMITS,
        { loginPerIp: 1000, loginFailuresPerEmailAndIp: 1000, loginFailuresPerEmailPerHour: 1000, signupPerIp: 1000 },
      ],
    ]);
  });
  afterAll(async () => {
    await t.close();
    rmSync(webDir, { recursive: true, force: true });
  });

  const expectPageHeaders = (res: { headers: Record<string, string> }) => {
    const csp = res.headers['content-security-policy'];
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toMatch(/img-src 'self' http:\/\/files\.example\.test:8080(;|$)/);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['referrer-policy']).toBe('same-origin');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  };

  describe('serving', () => {
    it('GET / redirects to /app/, with the page headers', async () => {
      const res = await t.http.get('/').set('Origin', 'https://evil.example').expect(302);
      expect(res.headers.location).toBe('/app/');
      expectPageHeaders(res);
      expect((await t.http.get('/app').expect(302)).headers.location).toBe('/app/');
    });

    it('/app/ and any page path under it answer index.html with the headers', async () => {
      for (const page of ['/app/', '/app/batches/0b7e', '/app/keys']) {
        const res = await t.http.get(page).set('Origin', 'https://evil.example').expect(200);
        expect(res.headers['content-type']).toMatch(/^text\/html/);
        expect(res.text).toContain('<div id="app">');
        expect(res.headers['cache-control']).toBe('no-cache');
        expectPageHeaders(res);
      }
    });

    it('an asset has its type, the headers and a long cache; a missing one is a 404 error object', async () => {
      const res = await t.http.get('/app/assets/index-abc123.js').expect(200);
      expect(res.headers['content-type']).toMatch(/javascript/);
      expect(res.headers['cache-control']).toContain('immutable');
      expectPageHeaders(res);
      const missing = await t.http.get('/app/assets/nope.js').expect(404);
      expect(missing.body.error.code).toBe('not_found');
      expectPageHeaders(missing);
    });

    it('a path that climbs out of the app folder gets index.html, never the file', async () => {
      const res = await t.http.get('/app/%2e%2e%2f%2e%2e%2fetc%2fpasswd').expect(200);
      expect(res.text).toContain('<div id="app">');
      expect(res.text).not.toContain('root:');
    });

    it('API answers carry no CORS headers, preflights included', async () => {
      const res = await t.http
        .options('/v1/dashboard/account')
        .set('Origin', 'https://evil.example')
        .set('Access-Control-Request-Method', 'POST');
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
      expect(res.headers['access-control-allow-headers']).toBeUndefined();
    });
  });

  describe('cookie sessions', () => {
    /** Signs up in cookie mode; answers the Cookie header value to send back. */
    async function cookieHolder(): Promise<{ cookie: string; email: string }> {
      const email = `w-${randomUUID()}@example.test`;
      const res = await t.http.post('/v1/dashboard/signup').set(COOKIE_MODE).send({ email, password: PASSWORD }).expect(201);
      expect(res.body.token).toBeUndefined();
      expect(res.body.expiresAt).toBeGreaterThan(Date.now());
      const setCookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []);
      expect(setCookie).toHaveLength(1);
      expect(setCookie[0]).toMatch(/^kiln_session=kiln_sess_[A-Za-z0-9_-]{43};/);
      expect(setCookie[0]).toMatch(/; HttpOnly/);
      expect(setCookie[0]).toMatch(/; SameSite=Strict/);
      expect(setCookie[0]).toMatch(/; Path=\/v1\/dashboard/);
      expect(setCookie[0]).not.toMatch(/; Secure/); // plain http here
      return { cookie: setCookie[0].split(';')[0], email };
    }

    it('signup and login without the header still answer the token in the body and set no cookie', async () => {
      const email = `w-${randomUUID()}@example.test`;
      const res = await t.http.post('/v1/dashboard/signup').send({ email, password: PASSWORD }).expect(201);
      expect(res.body.token).toMatch(/^kiln_sess_/);
      expect(res.headers['set-cookie']).toBeUndefined();
      const login = await t.http.post('/v1/dashboard/login').send({ email, password: PASSWORD }).expect(200);
      expect(login.headers['set-cookie']).toBeUndefined();
    });

    it('login in cookie mode sets the cookie; reads work with the cookie alone', async () => {
      const { email } = await cookieHolder();
      const login = await t.http.post('/v1/dashboard/login').set(COOKIE_MODE).send({ email, password: PASSWORD }).expect(200);
      expect(login.body).toEqual({ expiresAt: expect.any(Number) });
      const cookie = ([] as string[]).concat(login.headers['set-cookie'])[0].split(';')[0];
      const account = await t.http.get('/v1/dashboard/account').set('Cookie', cookie).expect(200);
      expect(account.body.account.email).toBe(email);
    });

    it('a cookie-authenticated write without X-Kiln-Session is refused with the error object and changes nothing', async () => {
      const { cookie } = await cookieHolder();
      const refused = await t.http
        .post('/v1/dashboard/webhooks')
        .set('Cookie', cookie)
        .send({ url: 'https://hooks.example.com/k' })
        .expect(400);
      expect(refused.body.error).toEqual({
        code: 'invalid_request',
        message: expect.any(String),
        details: { field: 'X-Kiln-Session', reason: 'csrf_header_missing' },
      });
      const logoutRefused = await t.http.post('/v1/dashboard/logout').set('Cookie', cookie).expect(400);
      expect(logoutRefused.body.error.details.reason).toBe('csrf_header_missing');
      const list = await t.http.get('/v1/dashboard/webhooks').set('Cookie', cookie).expect(200);
      expect(list.body.endpoints).toHaveLength(0);
      // The session survived the refused logout.
      await t.http.get('/v1/dashboard/account').set('Cookie', cookie).expect(200);
    });

    it('with the header the write goes through; logout clears the cookie and ends the session', async () => {
      const { cookie } = await cookieHolder();
      await t.http
        .post('/v1/dashboard/batches/estimate')
        .set('Cookie', cookie)
        .set(COOKIE_MODE)
        .send({ prompts: ['a fox'], model: 'eta-image' })
        .expect(200);
      const out = await t.http.post('/v1/dashboard/logout').set('Cookie', cookie).set(COOKIE_MODE).expect(204);
      const cleared = ([] as string[]).concat(out.headers['set-cookie'])[0];
      expect(cleared).toMatch(/^kiln_session=;/);
      expect(cleared).toMatch(/Expires=Thu, 01 Jan 1970/);
      const after = await t.http.get('/v1/dashboard/account').set('Cookie', cookie).expect(401);
      expect(after.body.error).toMatchObject({ code: 'invalid_credentials', details: { reason: 'signed_out' } });
    });

    it('Secure is set when the request came over https (through a trusted proxy)', async () => {
      const email = `w-${randomUUID()}@example.test`;
      const config = buildConfig({ ...process.env, WEB_APP_DIR: webDir, TRUST_PROXY: 'loopback' });
      config.redisPrefix = `${config.redisPrefix}:web-${randomBytes(4).toString('hex')}`;
      const proxied = await bootTestApp(ApiModule, configureApp, [[KILN_CONFIG, config]]);
      try {
        const res = await proxied.http
          .post('/v1/dashboard/signup')
          .set(COOKIE_MODE)
          .set('X-Forwarded-Proto', 'https')
          .send({ email, password: PASSWORD })
          .expect(201);
        expect(([] as string[]).concat(res.headers['set-cookie'])[0]).toMatch(/; Secure/);
      } finally {
        await proxied.close();
      }
    });

    it('a Bearer header wins over the cookie, and bearer writes need no CSRF header', async () => {
      const { cookie } = await cookieHolder();
      const email = `w-${randomUUID()}@example.test`;
      const other = await t.http.post('/v1/dashboard/signup').send({ email, password: PASSWORD }).expect(201);
      const account = await t.http
        .get('/v1/dashboard/account')
        .set('Cookie', cookie)
        .set('Authorization', `Bearer ${other.body.token}`)
        .expect(200);
      expect(account.body.account.email).toBe(email);
      await t.http
        .post('/v1/dashboard/batches/estimate')
        .set('Authorization', `Bearer ${other.body.token}`)
        .send({ prompts: ['a fox'], model: 'eta-image' })
        .expect(200);
    });
  });

  describe('dashboard routes the web app needs', () => {
    it('GET /v1/dashboard/models answers the catalog of GET /v1/models', async () => {
      const { body } = await t.http
        .post('/v1/dashboard/signup')
        .send({ email: `w-${randomUUID()}@example.test`, password: PASSWORD })
        .expect(201);
      const res = await t.http.get('/v1/dashboard/models').set('Authorization', `Bearer ${body.token}`).expect(200);
      expect(res.body.models.map((m: { key: string }) => m.key)).toContain('eta-image');
      expect(res.body.limits.maxPrompts).toBe(1000);
      await t.http.get('/v1/dashboard/models').expect(401);
    });

    it('POST /v1/dashboard/uploads stores a reference for a free-plan holder; refusals use the error object', async () => {
      const { body } = await t.http
        .post('/v1/dashboard/signup')
        .send({ email: `w-${randomUUID()}@example.test`, password: PASSWORD })
        .expect(201);
      const auth = { Authorization: `Bearer ${body.token}` };
      const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
      const res = await t.http.post('/v1/dashboard/uploads').set(auth).attach('file', png, 'dot.png').expect(200);
      expect(res.body.files).toEqual([{ url: expect.stringMatching(/^http:\/\/files\.example\.test:8080\/files\//), name: 'dot.png' }]);
      const refused = await t.http.post('/v1/dashboard/uploads').set(auth).attach('file', Buffer.from('not an image'), 'x.png').expect(400);
      expect(refused.body.error).toMatchObject({ code: 'invalid_request', details: { reason: 'unsupported_type' } });
    });
  });
});
