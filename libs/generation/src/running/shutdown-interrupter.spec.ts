import { getMaxListeners } from 'node:events';
import { shutdownInterrupter } from './shutdown-interrupter';

// (jest's sandboxed `process` does not see Node's warnings, so the limit itself is checked.)
describe('shutdownInterrupter', () => {
  it('allows the listeners every run of a busy generator holds, where a plain signal warns past 10', () => {
    // (A plain signal's own limit differs by Node version: 10 on Node 20, 0 on Node 24.)
    expect(getMaxListeners(shutdownInterrupter(50).signal)).toBeGreaterThanOrEqual(3 * 50);
  });

  it('stays bounded by the concurrency, so a real leak still warns', () => {
    expect(getMaxListeners(shutdownInterrupter(2).signal)).toBeLessThan(40);
    expect(getMaxListeners(shutdownInterrupter(1000).signal)).toBeLessThan(5000);
  });
});
