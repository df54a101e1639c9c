import type { ForbiddenRange } from './address-policy';

/**
 * Refusals are about the target itself (retrying changes nothing); `timeout`, `network` and
 * `unresolvable` are the ordinary troubles of reaching a host, which may pass.
 */
export type EgressRefusal = 'bad_url' | 'not_https' | 'forbidden_address' | 'redirect' | 'too_large' | 'unexpected_content_type';
export type EgressFailureReason = EgressRefusal | 'timeout' | 'network' | 'unresolvable';

const REFUSALS: ReadonlySet<EgressFailureReason> = new Set<EgressRefusal>([
  'bad_url',
  'not_https',
  'forbidden_address',
  'redirect',
  'too_large',
  'unexpected_content_type',
]);

export interface EgressErrorDetail {
  /** forbidden_address: which range the address falls in. */
  range?: ForbiddenRange;
  /** network, unresolvable: the system error code (ECONNREFUSED, ENOTFOUND...). */
  code?: string;
}

/** Why an outbound request was refused or did not complete. Messages never carry a URL's query or credentials. */
export class EgressError extends Error {
  constructor(
    readonly reason: EgressFailureReason,
    message: string,
    readonly detail: EgressErrorDetail = {},
  ) {
    super(message);
    this.name = 'EgressError';
  }

  /** True when the target itself is unacceptable, so asking again cannot help. */
  get refused(): boolean {
    return REFUSALS.has(this.reason);
  }
}

export function isEgressError(err: unknown): err is EgressError {
  return err instanceof EgressError;
}
