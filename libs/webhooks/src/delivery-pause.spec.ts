import { deliveryPauseMs } from './webhook-sender.service';

describe('deliveryPauseMs: deliveries yield to renders that saturate the loop', () => {
  it('goes again at once when nothing else is in flight, however busy the loop', () => {
    expect(deliveryPauseMs({ ms: 40, loopUtilization: 1, busy: false })).toBe(0);
  });

  it('goes again at once when renders are in flight but the loop has room (renders waiting on their providers)', () => {
    expect(deliveryPauseMs({ ms: 40, loopUtilization: 0.69, busy: true })).toBe(0);
  });

  it('waits eight rounds long when renders are in flight and the loop is saturated', () => {
    expect(deliveryPauseMs({ ms: 20, loopUtilization: 0.7, busy: true })).toBe(160);
    expect(deliveryPauseMs({ ms: 12.4, loopUtilization: 0.95, busy: true })).toBe(99);
  });

  it('keeps the wait between 10 and 250 ms, so deliveries slow down but never stop', () => {
    expect(deliveryPauseMs({ ms: 0.2, loopUtilization: 1, busy: true })).toBe(10);
    expect(deliveryPauseMs({ ms: 5_000, loopUtilization: 1, busy: true })).toBe(250);
  });
});
