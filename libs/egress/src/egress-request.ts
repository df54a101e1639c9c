import { promises as dns } from 'node:dns';
import * as http from 'node:http';
import * as https from 'node:https';
import { isIP, LookupFunction } from 'node:net';
import { abortReason } from '@app/errors';
import { forbiddenRange, isInternalHostName } from './address-policy';
import { EgressError } from './egress.errors';

/**
 * What a caller may reach. By default only https URLs whose host resolves to public
 * addresses only; `allowPrivate` lifts both rules (an operator's explicit choice, e.g.
 * UPSTREAM_ALLOW_PRIVATE for a self-hosted model), `trustedOrigins` lifts them for a few
 * exact origins (scheme://host:port) only.
 */
export interface EgressPolicy {
  allowPrivate: boolean;
  trustedOrigins?: readonly string[];
  /** The setting that would allow a refused private address or http URL, named in the refusal. */
  allowSetting?: string;
}

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Every address a host name resolves to; the default is the system resolver (dns.lookup). */
export type ResolveHost = (hostname: string) => Promise<ResolvedAddress[]>;

const systemResolve: ResolveHost = (hostname) => dns.lookup(hostname, { all: true, verbatim: true });

/** A URL that passed the policy, and the one address the connection must go to. */
export interface EgressTarget {
  url: URL;
  address: string;
  family: 4 | 6;
}

export interface CheckOptions {
  resolve?: ResolveHost;
  /** Ends the name lookup early (the check throws the signal's reason). */
  signal?: AbortSignal;
}

/**
 * Parses the URL, applies the policy to its scheme, resolves its host once and refuses it
 * when ANY address is not public: a name with one public and one internal address would
 * otherwise reach the internal one on some connections. The caller connects to the
 * returned address and nothing else, so a second lookup (DNS rebinding) cannot redirect it.
 */
export async function checkEgressTarget(rawUrl: string, policy: EgressPolicy, options: CheckOptions = {}): Promise<EgressTarget> {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new EgressError('bad_url', 'Not a URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new EgressError('bad_url', `Unsupported URL scheme (${url.protocol})`);
  }
  if (url.username || url.password) throw new EgressError('bad_url', 'URLs with credentials are not fetched');
  const trusted = policy.allowPrivate || (policy.trustedOrigins ?? []).includes(url.origin);

  const host = hostOf(url);
  if (!trusted && isInternalHostName(host)) {
    throw new EgressError('forbidden_address', `The host name is reserved for internal networks${allowedBy(policy)}`, {
      range: 'internal_name',
    });
  }
  const addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await resolveAll(host, options);
  if (!trusted) {
    for (const { address } of addresses) {
      const range = forbiddenRange(address);
      if (range) {
        throw new EgressError(
          'forbidden_address',
          `The host resolves to a non-public address (${range.replace('_', '-')})${allowedBy(policy)}`,
          { range },
        );
      }
    }
    // After the address check, which says more when both fail.
    if (url.protocol === 'http:') throw new EgressError('not_https', `Only https URLs are fetched${allowedBy(policy)}`);
  }
  const [first] = addresses;
  return { url, address: first.address, family: first.family === 6 ? 6 : 4 };
}

/** Says which operator setting would allow it (development, private networks), when the caller named one. */
function allowedBy(policy: EgressPolicy): string {
  return policy.allowSetting ? `; the operator's ${policy.allowSetting}=true allows private addresses and http` : '';
}

export interface EgressRequestOptions {
  policy: EgressPolicy;
  method?: 'GET' | 'POST' | 'PUT';
  headers?: Record<string, string>;
  body?: Buffer;
  /** The longest body read; a longer one (declared or streamed) is abandoned at once. */
  maxBytes: number;
  /** The whole exchange: lookup, connect, answer and body. */
  timeoutMs: number;
  /** Connecting alone (default: the lesser of timeoutMs and 10 s). */
  connectTimeoutMs?: number;
  /** The caller's own cancellation: the request rejects with the signal's reason. */
  signal?: AbortSignal;
  /** For 2xx answers: refuse the body unless its Content-Type passes (checked before reading it). */
  acceptContentType?: (contentType: string | undefined) => boolean;
  resolve?: ResolveHost;
  /**
   * Keep the connection open for the next request to the same checked address (see
   * PinnedAgent). For a caller that sends many requests to few hosts (webhook deliveries).
   */
  keepAlive?: boolean;
}

export interface EgressResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** The request option PinnedAgent pools by: the address this request's own check approved. */
interface PinnedRequestOptions extends http.RequestOptions {
  pinnedAddress: string;
}

/**
 * Idle connections kept per pool; one closes after this long unused (a receiver's own
 * Keep-Alive timeout, when it sends one, closes it sooner).
 */
const MAX_IDLE_SOCKETS = 64;
const IDLE_SOCKET_MS = 5_000;

/**
 * A keep-alive agent whose pools are keyed by the checked address as well as by host and
 * port: a connection is reused only by a request whose own check, just made, approved the
 * address it is connected to. So a socket opened under a laxer policy (an operator's
 * private upstream) is never handed to a stricter caller, and a host that now resolves
 * elsewhere (DNS rebinding) gets a new connection to its newly checked address.
 */
function pinnedAgent<T extends typeof http.Agent>(Base: T): InstanceType<T> {
  class PinnedAgent extends (Base as typeof http.Agent) {
    getName(options: PinnedRequestOptions): string {
      return `${super.getName(options)}|${options.pinnedAddress}`;
    }
  }
  return new PinnedAgent({
    keepAlive: true,
    maxFreeSockets: MAX_IDLE_SOCKETS,
    timeout: IDLE_SOCKET_MS,
    scheduling: 'lifo',
  }) as InstanceType<T>;
}

const pooled = { 'http:': pinnedAgent(http.Agent), 'https:': pinnedAgent(https.Agent) };

/**
 * One HTTP exchange with a host a third party named (an upstream's image URL, a webhook
 * endpoint): checked by the policy, connected to exactly the checked address (TLS SNI and
 * Host still name the host), never following a redirect, bounded in time and in bytes
 * while streaming, so memory stays bounded whatever the other side sends.
 */
export async function egressRequest(rawUrl: string, options: EgressRequestOptions): Promise<EgressResponse> {
  options.signal?.throwIfAborted();
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new EgressError('timeout', `No complete answer within ${formatSeconds(options.timeoutMs)}`)),
    options.timeoutMs,
  );
  // Combined by hand rather than with AbortSignal.any, so a long-lived caller signal does
  // not collect a listener per request.
  const onCallerAbort = (): void => controller.abort(options.signal!.reason);
  options.signal?.addEventListener('abort', onCallerAbort, { once: true });
  try {
    const target = await checkEgressTarget(rawUrl, options.policy, { resolve: options.resolve, signal: controller.signal });
    return await exchange(target, options, controller.signal);
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onCallerAbort);
  }
}

function exchange(target: EgressTarget, options: EgressRequestOptions, signal: AbortSignal): Promise<EgressResponse> {
  signal.throwIfAborted();
  const { url, address } = target;
  const client = url.protocol === 'https:' ? https : http;

  return new Promise<EgressResponse>((resolve, reject) => {
    let settled = false;
    let connectTimer: NodeJS.Timeout | undefined;
    const requestOptions: PinnedRequestOptions = {
      protocol: url.protocol,
      hostname: hostOf(url),
      port: url.port || undefined,
      path: `${url.pathname}${url.search}`,
      method: options.method ?? 'GET',
      headers: options.body ? { ...options.headers, 'content-length': String(options.body.length) } : options.headers,
      lookup: pinnedLookup(target),
      pinnedAddress: address,
      // Without keepAlive, a connection of its own; with it, one pooled by checked address.
      agent: options.keepAlive ? pooled[url.protocol as 'http:' | 'https:'] : false,
    };
    const req = client.request(requestOptions);

    const finish = (err: Error | null, value?: EgressResponse): void => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      signal.removeEventListener('abort', onAbort);
      if (err) {
        req.destroy();
        reject(signal.aborted ? abortReason(signal) : err instanceof EgressError ? err : networkError(err));
      } else {
        resolve(value!);
      }
    };
    const onAbort = (): void => finish(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });

    req.on('socket', (socket) => {
      if (!socket.connecting) return;
      const ms = options.connectTimeoutMs ?? Math.min(options.timeoutMs, DEFAULT_CONNECT_TIMEOUT_MS);
      connectTimer = setTimeout(() => finish(new EgressError('timeout', `Could not connect within ${formatSeconds(ms)}`)), ms);
      socket.once('connect', () => clearTimeout(connectTimer));
    });
    req.on('error', (err) => finish(err));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      if (status >= 300 && status < 400) {
        res.resume();
        return finish(new EgressError('redirect', `Redirects are not followed (${status})`));
      }
      const contentType = res.headers['content-type'];
      if (status >= 200 && status < 300 && options.acceptContentType && !options.acceptContentType(contentType)) {
        res.resume();
        return finish(new EgressError('unexpected_content_type', `Unexpected content type (${String(contentType).slice(0, 60)})`));
      }
      const tooLarge = () => new EgressError('too_large', `The answer is larger than ${formatBytes(options.maxBytes)}`);
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > options.maxBytes) return finish(tooLarge());
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        size += chunk.length;
        if (size > options.maxBytes) return finish(tooLarge());
        chunks.push(chunk);
      });
      res.on('end', () => finish(null, { status, headers: res.headers, body: Buffer.concat(chunks, size) }));
      res.on('error', (err) => finish(err));
      res.on('aborted', () => finish(new EgressError('network', 'The connection closed before the answer was complete')));
    });
    req.end(options.body);
  });
}

async function resolveAll(host: string, options: CheckOptions): Promise<ResolvedAddress[]> {
  const lookup = (options.resolve ?? systemResolve)(host);
  let addresses: ResolvedAddress[];
  try {
    addresses = await (options.signal ? untilAborted(lookup, options.signal) : lookup);
  } catch (err) {
    if (options.signal?.aborted) throw options.signal.reason;
    throw new EgressError('unresolvable', `The host name does not resolve${codeSuffix(err)}`, { code: systemCode(err) });
  }
  if (addresses.length === 0) throw new EgressError('unresolvable', 'The host name does not resolve');
  return addresses;
}

/** A name lookup cannot be cancelled, but its caller can stop waiting for it. */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * A lookup that answers only the address the policy checked, so the connection goes where
 * the check allowed and never to a second DNS answer (egressRequest's and egressStream's).
 */
export function pinnedLookup({ address, family }: { address: string; family: 4 | 6 }): LookupFunction {
  // Node asks with all: true when it may try several addresses (autoSelectFamily).
  return ((_host: string, opts: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (opts.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as unknown as LookupFunction;
}

/** The URL's host as a request takes it: an IPv6 literal without its brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

function networkError(err: Error): EgressError {
  return new EgressError('network', `The connection failed${codeSuffix(err)}`, { code: systemCode(err) });
}

/** The system error code of a failed connection (ECONNREFUSED...), when it has one. */
export function systemCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && /^[A-Z_]+$/.test(code) ? code : undefined;
}

function codeSuffix(err: unknown): string {
  const code = systemCode(err);
  return code ? ` (${code})` : '';
}

export function formatSeconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${(ms / 1000).toFixed(1)} s`;
}

export function formatBytes(bytes: number): string {
  const mb = bytes / (1024 * 1024);
  if (mb >= 1) return `${Number.isInteger(mb) ? mb : mb.toFixed(1)} MB`;
  return `${Math.ceil(bytes / 1024)} KB`;
}
