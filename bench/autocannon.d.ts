/**
 * The part of autocannon 8's programmatic API the benchmarks use. The package ships no
 * types and @types/autocannon is not installed; this keeps bench/ type-checked without it.
 */
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  interface Histogram {
    min: number;
    max: number;
    average: number;
    mean: number;
    stddev: number;
    total: number;
    p2_5: number;
    p50: number;
    p75: number;
    p90: number;
    p97_5: number;
    p99: number;
    p99_9: number;
  }

  interface Options {
    url: string;
    connections?: number;
    duration?: number;
    amount?: number;
    timeout?: number;
    method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
    headers?: Record<string, string>;
    body?: string | Buffer;
    pipelining?: number;
    workers?: number;
    /** Called once per connection; without workers it may be a function. */
    setupClient?: (client: Client) => void;
  }

  interface Client {
    setHeaders(headers: Record<string, string>): void;
  }

  interface Result {
    url: string;
    requests: Histogram;
    latency: Histogram;
    throughput: Histogram;
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
    statusCodeStats: Record<string, { count: number }>;
    start: Date;
    finish: Date;
  }

  function autocannon(opts: Options): PromiseLike<Result> & EventEmitter;
  export = autocannon;
}
