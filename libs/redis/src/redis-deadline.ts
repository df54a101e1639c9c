/**
 * A Redis call given at most `ms` to answer: it rejects after that (the call itself runs on).
 * Callers that keep working without Redis (the route pacer and circuits, the task dispatch's
 * room checks) use it so a frozen Redis costs them `ms`, not ioredis's own reconnect waits.
 */
export function withinRedisDeadline<T>(call: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Redis did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([call, timeout]).finally(() => clearTimeout(timer));
}
