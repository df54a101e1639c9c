import { HeartbeatTarget, StreamHeartbeats } from './stream-heartbeats';

function stream(): HeartbeatTarget & { written: string[] } {
  const written: string[] = [];
  return { written, destroyed: false, write: (chunk: string) => written.push(chunk) > 0 };
}

describe('StreamHeartbeats', () => {
  it('sends a comment line only to streams quiet for the whole interval, then waits another interval for each', () => {
    const beats = new StreamHeartbeats(10_000, 5000);
    const [quiet, busy] = [stream(), stream()];
    beats.add(quiet, 0);
    beats.add(busy, 0);
    beats.wrote(busy, 8000);
    beats.beat(9999);
    expect(quiet.written).toEqual([]);
    beats.beat(10_000);
    expect(quiet.written).toEqual([': keepalive\n\n']);
    expect(busy.written).toEqual([]);
    beats.beat(15_000);
    expect(quiet.written).toHaveLength(1);
    beats.beat(20_000);
    expect(quiet.written).toHaveLength(2);
    expect(busy.written).toEqual([': keepalive\n\n']);
    beats.remove(quiet);
    beats.remove(busy);
    expect(beats.open).toBe(0);
  });

  it('writes nothing to a removed or destroyed stream, and a write after removal does not bring it back', () => {
    const beats = new StreamHeartbeats(10_000, 5000);
    const [gone, destroyed] = [stream(), { ...stream(), destroyed: true }];
    beats.add(gone, 0);
    beats.add(destroyed, 0);
    beats.remove(gone);
    beats.wrote(gone, 1);
    beats.beat(60_000);
    expect(gone.written).toEqual([]);
    expect(destroyed.written).toEqual([]);
    expect(beats.open).toBe(1);
    beats.remove(destroyed);
  });
});
