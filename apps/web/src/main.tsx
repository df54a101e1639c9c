import { render } from 'preact';
import { api, whenSignedOut } from './api';
import { AuthPage } from './pages/auth';
import { BatchesPage } from './pages/batches';
import { CreditsPage } from './pages/credits';
import { KeysPage } from './pages/keys';
import { OverviewPage } from './pages/overview';
import { UsagePage } from './pages/usage';
import { WebhooksPage } from './pages/webhooks';
import { Link, navigate, usePath } from './router';
import { refreshAccount, setSession, useSession } from './session';
import { ErrorState, formatNumber, Loading } from './ui';
import type { ComponentType } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import './styles.css';

whenSignedOut((message) => setSession({ kind: 'signed-out', message }));

const NAV = [
  { to: '/', label: 'Overview' },
  { to: '/batches', label: 'Batches' },
  { to: '/batches/new', label: 'New batch' },
  { to: '/usage', label: 'Usage' },
  { to: '/keys', label: 'API keys' },
  { to: '/webhooks', label: 'Webhooks' },
];
/** Shown only where the installation sells credits. */
const CREDITS_NAV = { to: '/credits', label: 'Buy credits' };

/**
 * A page loaded with its first visit, not with the first page: the new-batch form (with the
 * prompts-file reader) and the batch page are most of the app's code.
 */
const loaded = new Map<string, ComponentType<Record<string, unknown>>>();
function LazyPage({ name, load, props = {} }: { name: string; load: () => Promise<unknown>; props?: Record<string, unknown> }) {
  const [Page, setPage] = useState(() => loaded.get(name));
  const [error, setError] = useState<unknown>(undefined);
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    if (Page) return;
    load().then(
      (mod) => {
        const C = (mod as Record<string, ComponentType<Record<string, unknown>>>)[name];
        loaded.set(name, C);
        setPage(() => C);
      },
      (err) => setError(err),
    );
  }, [attempt]);
  if (Page) return <Page {...props} />;
  if (error !== undefined)
    return (
      <ErrorState
        error={error}
        onRetry={() => {
          setError(undefined);
          setAttempt(attempt + 1);
        }}
      />
    );
  return <Loading />;
}

function Page({ path }: { path: string }) {
  if (path === '/') return <OverviewPage />;
  if (path === '/keys') return <KeysPage />;
  if (path === '/usage') return <UsagePage />;
  if (path === '/batches') return <BatchesPage />;
  if (path === '/batches/new') return <LazyPage name="NewBatchPage" load={() => import('./pages/new-batch')} />;
  if (path === '/webhooks') return <WebhooksPage />;
  if (path === '/credits') return <CreditsPage />;
  const batch = /^\/batches\/([^/]+)$/.exec(path);
  if (batch)
    return <LazyPage name="BatchPage" load={() => import('./pages/batch')} props={{ id: decodeURIComponent(batch[1]) }} key={batch[1]} />;
  return (
    <section>
      <h1>Not found</h1>
      <p>
        No page here. <Link to="/">Go to the overview</Link>.
      </p>
    </section>
  );
}

function isCurrent(to: string, path: string): boolean {
  if (to === '/') return path === '/';
  if (to === '/batches') return path === '/batches' || (path.startsWith('/batches/') && path !== '/batches/new');
  return path === to;
}

async function signOut() {
  try {
    await api('POST', '/logout');
  } catch {
    // Already signed out or unreachable: the cookie goes either way on the next sign-in.
  }
  setSession({ kind: 'signed-out', message: 'You signed out.' });
  navigate('/signin');
}

function App() {
  const session = useSession();
  const path = usePath();
  const sellsCredits = session.kind === 'signed-in' && session.info.purchasesEnabled;
  const authPage = path === '/signin' || path === '/signup';
  // On a phone the nav and the account folds into one row: brand, balance, "Menu".
  const [menuOpen, setMenuOpen] = useState(false);
  useEffect(() => setMenuOpen(false), [path]);

  if (session.kind === 'checking')
    return (
      <main id="main" class="centered">
        <Loading />
      </main>
    );
  if (session.kind === 'unavailable') {
    return (
      <main id="main" class="centered">
        <h1>Kiln</h1>
        <ErrorState error={session.error} onRetry={() => void refreshAccount()} />
      </main>
    );
  }
  if (session.kind === 'signed-out' || authPage) {
    if (session.kind === 'signed-in' && authPage) {
      navigate('/', { replace: true });
      return null;
    }
    return (
      <AuthPage mode={path === '/signup' ? 'signup' : 'signin'} message={session.kind === 'signed-out' ? session.message : undefined} />
    );
  }
  const { account } = session.info;
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class={menuOpen ? 'top open' : 'top'}>
        <Link to="/" class="brand" aria-label="Kiln overview">
          Kiln
        </Link>
        <button type="button" class="menu-toggle" aria-expanded={menuOpen} aria-controls="main-nav" onClick={() => setMenuOpen(!menuOpen)}>
          Menu
        </button>
        <nav aria-label="Main" id="main-nav">
          <ul>
            {(sellsCredits ? [...NAV, CREDITS_NAV] : NAV).map((n) => (
              <li key={n.to}>
                <Link to={n.to} aria-current={isCurrent(n.to, path) ? 'page' : undefined}>
                  {n.label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span class="email" title={account.email}>
            {account.email}
          </span>
          <span class="balance" data-testid="header-balance">
            {formatNumber(account.balance)} credits
          </span>
          <button type="button" onClick={() => void signOut()}>
            Sign out
          </button>
        </div>
        {/* The phone's one row shows the balance before "Menu" (CSS order); last here, so the account's own comes first. */}
        <span class="balance balance-phone">{formatNumber(account.balance)} credits</span>
      </header>
      <main id="main">
        <Page path={path} />
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
void refreshAccount();
