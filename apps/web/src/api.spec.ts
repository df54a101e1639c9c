// The module alone, not @app/webhooks' index (which brings the NestJS module with it).
import { WEBHOOK_EVENT_TYPES } from '../../../libs/webhooks/src/webhook-events';
import { WEBHOOK_EVENTS } from './api';

describe("the web app's webhook events", () => {
  it('offers every event type the api accepts, the spend alerts included', () => {
    expect(WEBHOOK_EVENTS).toEqual([...WEBHOOK_EVENT_TYPES]);
  });
});
