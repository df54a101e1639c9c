import { ProviderError } from '@app/providers';
import { classifyFailure, exhaustedMessage, oneLine, TaskFailure } from './task-failure';

describe('classifyFailure', () => {
  it('follows the provider error', () => {
    expect(classifyFailure(new ProviderError('rate_limited', 'Upstream rate limit reached (429)', { retryAfterMs: 2000 }))).toEqual({
      retryable: true,
      message: 'Upstream rate limit reached (429)',
      retryAfterMs: 2000,
      internal: false,
      code: 'upstream_unavailable',
    });
    expect(classifyFailure(new ProviderError('bad_request', 'Upstream refused the request (400)')).retryable).toBe(false);
  });

  it('gives each failure the errorCode clients branch on', () => {
    expect(classifyFailure(new ProviderError('bad_request', 'Upstream refused the request (400)')).code).toBe('upstream_rejected');
    expect(classifyFailure(new ProviderError('timeout', 'Upstream timed out (408)')).code).toBe('upstream_unavailable');
    expect(classifyFailure(new ProviderError('upstream_error', 'Upstream error (503)')).code).toBe('upstream_unavailable');
    expect(classifyFailure(new ProviderError('not_configured', 'OPENAI_API_KEY is not set')).code).toBe('provider_not_configured');
    expect(classifyFailure(new TaskFailure('routing is not usable', 'provider_not_configured')).code).toBe('provider_not_configured');
    expect(classifyFailure(new TaskFailure('Reference image 1 is no longer available')).code).toBe('internal');
    expect(classifyFailure(new Error('boom')).code).toBe('internal');
  });

  it('fails a TaskFailure at once with its message', () => {
    expect(classifyFailure(new TaskFailure('Reference image 1 is no longer available'))).toMatchObject({
      retryable: false,
      message: 'Reference image 1 is no longer available',
    });
  });

  it('retries anything else and never exposes its text', () => {
    const c = classifyFailure(new Error('connect ECONNREFUSED 10.0.0.5:5432\n    at TCPConnectWrap'));
    expect(c.retryable).toBe(true);
    expect(c.internal).toBe(true);
    expect(c.message).not.toMatch(/ECONNREFUSED|at /);
  });

  it('keeps messages to one short line', () => {
    expect(oneLine('a\n  b')).toBe('a b');
    expect(oneLine('x'.repeat(1000))).toHaveLength(300);
    expect(exhaustedMessage('Upstream error (500)', 3)).toBe('Upstream error (500) (gave up after 3 attempts)');
  });
});
