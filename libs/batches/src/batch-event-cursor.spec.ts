import { KilnError } from '@app/errors';
import { EventCursor } from './batch-event-cursor';

describe('EventCursor: a progress stream event id', () => {
  it('keeps the seen tasks as merged ranges, whatever order they finish in', () => {
    let c = EventCursor.start;
    for (const seq of [3, 0, 1, 7, 2, 5]) c = c.withTask(seq);
    expect(c.id).toBe('-1:0-3,5,7');
    expect(c.lowestUnseen).toBe(4);
    expect(c.bounds).toEqual({ lows: [0, 5, 7], highs: [3, 5, 7] });
    expect(c.withTask(4).withTask(6).withVersion(9, true).id).toBe('9:0-7;done');
    expect(c.withTask(2)).toBe(c);
  });

  it('parses what it writes; merges a hand-written id; refuses anything else with invalid_request', () => {
    const c = EventCursor.start.withTask(0).withTask(1).withTask(4).withVersion(12, false);
    expect(EventCursor.parse(c.id, 100).id).toBe('12:0-1,4');
    expect(EventCursor.parse('3:', 100).id).toBe('3:');
    expect(EventCursor.parse('3:5,0-2,3,9-9;done', 100)).toMatchObject({ version: 3, done: true, id: '3:0-3,5,9;done', lowestUnseen: 4 });
    for (const bad of ['', 'x', '3', '3:1-0', '3:5-200', '3:1,,2', '3:a', '3:0;finished']) {
      expect(() => EventCursor.parse(bad, 100)).toThrow(KilnError);
    }
  });
});
