export { forbiddenRange, isInternalHostName } from './address-policy';
export type { ForbiddenRange } from './address-policy';
export { EgressError, isEgressError } from './egress.errors';
export type { EgressErrorDetail, EgressFailureReason, EgressRefusal } from './egress.errors';
export { checkEgressTarget, egressRequest, formatBytes } from './egress-request';
export type {
  CheckOptions,
  EgressPolicy,
  EgressRequestOptions,
  EgressResponse,
  EgressTarget,
  ResolveHost,
  ResolvedAddress,
} from './egress-request';
export { egressStream } from './egress-stream';
export type { EgressStream, EgressStreamOptions } from './egress-stream';
