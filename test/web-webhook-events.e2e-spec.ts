import { WEBHOOK_EVENT_TYPES } from '@app/webhooks';
import { WEBHOOK_EVENTS } from '../apps/web/src/api';

/**
 * The web app's webhook form offers what the api accepts. Here, not beside the web app: its
 * type-check (apps/web/tsconfig.json) knows only the libs the browser bundle uses, and the
 * architecture check wants libs reached through their index.
 */
describe("the web app's webhook events", () => {
  it('offers every event type the api accepts, the spend alerts included', () => {
    expect(WEBHOOK_EVENTS).toEqual([...WEBHOOK_EVENT_TYPES]);
    expect(WEBHOOK_EVENTS).toEqual(expect.arrayContaining(['credits.low', 'key.budget.threshold']));
  });
});
