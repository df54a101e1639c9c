import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/* A tiny history router: the app lives under /app/, and the api answers index.html for any page path there. */
export const APP_BASE = '/app';
const listeners = new Set<() => void>();

export function currentPath(): string {
  const p = location.pathname.startsWith(APP_BASE) ? location.pathname.slice(APP_BASE.length) : '/';
  return p === '' ? '/' : p;
}

export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  if (opts.replace) history.replaceState(null, '', APP_BASE + to);
  else history.pushState(null, '', APP_BASE + to);
  listeners.forEach((l) => l());
}

addEventListener('popstate', () => listeners.forEach((l) => l()));

/** Calls `l` on every move of the URL (a navigate, back or forward); returns the unsubscribe. */
export function onNavigate(l: () => void): () => void {
  listeners.add(l);
  return () => void listeners.delete(l);
}

export function usePath(): string {
  const [path, setPath] = useState(currentPath());
  useEffect(() => {
    const update = () => setPath(currentPath());
    listeners.add(update);
    return () => listeners.delete(update);
  }, []);
  return path;
}

type LinkProps = {
  to: string;
  children: ComponentChildren;
  class?: string;
  'aria-label'?: string;
  'aria-current'?: 'page';
};

export function Link({ to, children, ...rest }: LinkProps) {
  const onClick = (e: MouseEvent) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to);
  };
  return (
    <a href={APP_BASE + to} onClick={onClick} {...rest}>
      {children}
    </a>
  );
}
