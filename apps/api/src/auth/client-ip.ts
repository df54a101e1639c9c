import type { Request } from 'express';

/**
 * The client's address for per-IP limits: Express's req.ip. Behind a proxy, set TRUST_PROXY
 * (Express's `trust proxy`) so it is the client's address rather than the proxy's.
 */
export const clientIp = (req: Request): string => req.ip ?? req.socket.remoteAddress ?? 'unknown';
