import autocannon from 'autocannon';
import { round } from './util';

export interface LoadOptions {
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  connections: number;
  durationSec: number;
  /** Headers of each connection in turn (replacing `headers`), e.g. one API key per connection. */
  headersPerConnection?: Record<string, string>[];
}

export interface LoadFigures {
  /** 2xx responses per second over the run. */
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  ok: number;
  non2xx: number;
  errors: number;
  durationSec: number;
  statusCodes: Record<string, number>;
}

/** One autocannon run (library mode, in this process). */
export async function runLoad(opts: LoadOptions): Promise<LoadFigures> {
  const result = await autocannon({
    url: opts.url,
    method: opts.method ?? 'GET',
    headers: opts.headers,
    body: opts.body,
    connections: opts.connections,
    duration: opts.durationSec,
    timeout: 30,
    ...(opts.headersPerConnection ? { setupClient: perConnection(opts.headersPerConnection) } : {}),
  });
  const statusCodes: Record<string, number> = {};
  for (const [code, s] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = Number(s.count);
  return {
    reqPerSec: round(result['2xx'] / result.duration, 1),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    ok: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    durationSec: round(result.duration, 2),
    statusCodes,
  };
}

function perConnection(headers: Record<string, string>[]): (client: { setHeaders(h: Record<string, string>): void }) => void {
  let next = 0;
  return (client) => client.setHeaders(headers[next++ % headers.length]);
}
