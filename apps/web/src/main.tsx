import { render } from 'preact';
import { api, whenSignedOut } from './api';
import { AuthPage } from './pages/auth';
import { BatchPage } from './pages/batch';
import { BatchesPage } from './pages/batches';
import { KeysPage } from './pages/keys';
import { NewBatchPage } from './pages/new-batch';
import { OverviewPage } from './pages/overview';
import { WebhooksPage } from './pages/webhooks';
import { Link, navigate, usePath } from './router';
import { refreshAccount, setSession, useSession } from './session';
import { ErrorState, formatNumber, Loading } from './ui';
import './styles.css';

whenSignedOut((message) => setSession({ kind: 'signed-out', message }));

const NAV = [
  { to: '/', label: 'Overview' },
  { to: '/batches', label: 'Batches' },
  { to: '/batches/new', label: 'New batch' },
  { to: '/keys', label: 'API keys' },
  { to: '/webhooks', label: 'Webhooks' },
];

function Page({ path }: { path: string }) {
  if (path === '/') return <OverviewPage />;
  if (path === '/keys') return <KeysPage />;
  if (path === '/batches') return <BatchesPage />;
  if (path === '/batches/new') return <NewBatchPage />;
  if (path === '/webhooks') return <WebhooksPage />;
  const batch = /^\/batches\/([^/]+)$/.exec(path);
  if (batch) return <BatchPage id={decodeURIComponent(batch[1])} key={batch[1]} />;
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
  const authPage = path === '/signin' || path === '/signup';

  if (session.kind === 'checking') return <main id="main" class="centered"><Loading /></main>;
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
    return <AuthPage mode={path === '/signup' ? 'signup' : 'signin'} message={session.kind === 'signed-out' ? session.message : undefined} />;
  }
  const { account } = session.info;
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <Link to="/" class="brand" aria-label="Kiln overview">
          Kiln
        </Link>
        <nav aria-label="Main">
          <ul>
            {NAV.map((n) => (
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
          <button type="button" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main">
        <Page path={path} />
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
void refreshAccount();
