import { useEffect, useState } from 'preact/hooks';
import { AccountInfo, api } from './api';

/*
 * Who is signed in, as the app knows it: the cookie is HttpOnly, so the app learns it from
 * GET /account (200: signed in; 401: not). Pages refresh it after anything that moves the
 * balance or the limits.
 */
export type SessionState =
  | { kind: 'checking' }
  | { kind: 'signed-out'; message?: string }
  | { kind: 'signed-in'; info: AccountInfo }
  | { kind: 'unavailable'; error: unknown };

let state: SessionState = { kind: 'checking' };
const listeners = new Set<(s: SessionState) => void>();

export function setSession(next: SessionState): void {
  state = next;
  listeners.forEach((l) => l(state));
}

export function useSession(): SessionState {
  const [s, set] = useState(state);
  useEffect(() => {
    listeners.add(set);
    set(state);
    return () => listeners.delete(set);
  }, []);
  return s;
}

export async function refreshAccount(): Promise<void> {
  try {
    setSession({ kind: 'signed-in', info: await api<AccountInfo>('GET', '/account') });
  } catch (error) {
    // A 401 already set signed-out (whenSignedOut in main.tsx).
    if (state.kind !== 'signed-out') setSession({ kind: 'unavailable', error });
  }
}
