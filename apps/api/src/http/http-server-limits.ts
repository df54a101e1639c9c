import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import type { KilnConfig } from '@app/config';

/**
 * Bounds what one client can hold of the api's HTTP server: a request (headers, then body)
 * must arrive within its timeouts, and one address may keep only so many connections open.
 * Without them a client sending one byte a minute held a socket and its buffers for Node's
 * default 300 s, and enough such clients exhausted the process.
 */
export function limitHttpServer(server: Server, limits: KilnConfig['http']): void {
  server.requestTimeout = limits.requestTimeoutMs;
  server.headersTimeout = limits.headersTimeoutMs;
  // Node enforces both timeouts on a periodic sweep of the open connections (default every
  // 30 s, which could double a 30 s limit); it reads this when the server starts listening.
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = Math.max(
    50,
    Math.min(1000, Math.floor(limits.headersTimeoutMs / 4)),
  );
  if (limits.maxConnectionsPerIp > 0) capConnectionsPerIp(server, limits.maxConnectionsPerIp);
}

function capConnectionsPerIp(server: Server, max: number): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const ip = socket.remoteAddress;
    if (!ip) return;
    const count = (open.get(ip) ?? 0) + 1;
    if (count > max) {
      // Closed before a byte is read: answering would mean parsing the request it came for.
      socket.destroy();
      return;
    }
    open.set(ip, count);
    socket.once('close', () => {
      const left = (open.get(ip) ?? 1) - 1;
      if (left <= 0) open.delete(ip);
      else open.set(ip, left);
    });
  });
}

/**
 * Headers every response carries: no MIME sniffing, and no caching of API answers (keys,
 * session tokens and balances are in them). Public files under /files set their own caching.
 */
export function securityHeaders(req: Request, res: Response, next: NextFunction): void {
  res.setHeader('X-Content-Type-Options', 'nosniff');
  if (!req.path.startsWith('/files/')) res.setHeader('Cache-Control', 'no-store');
  next();
}
