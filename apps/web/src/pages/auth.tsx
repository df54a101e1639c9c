import { useState } from 'preact/hooks';
import { api, ApiError, describeError } from '../api';
import { Link } from '../router';
import { refreshAccount } from '../session';

/** Sign in and sign up: the api sets the HttpOnly session cookie (X-Kiln-Session: cookie). */
export function AuthPage({ mode, message }: { mode: 'signin' | 'signup'; message?: string }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const signup = mode === 'signup';

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api('POST', signup ? '/signup' : '/login', { body: { email, password }, anonymous: true });
      await refreshAccount();
    } catch (err) {
      setError(authError(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main id="main" class="auth">
      <div class="auth-card">
        <p class="brand">Kiln</p>
        <h1>{signup ? 'Create your account' : 'Sign in'}</h1>
        {message && !error && (
          <p class="notice notice-info" role="status">
            {message}
          </p>
        )}
        <form onSubmit={(e) => void submit(e)} noValidate={false}>
          <label for="email">Email</label>
          <input
            id="email"
            type="email"
            autoComplete="email"
            required
            maxLength={254}
            value={email}
            onInput={(e) => setEmail(e.currentTarget.value)}
          />
          <label for="password">Password</label>
          <input
            id="password"
            type="password"
            autoComplete={signup ? 'new-password' : 'current-password'}
            required
            minLength={10}
            maxLength={200}
            aria-describedby={signup ? 'password-help' : undefined}
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
          {signup && (
            <p id="password-help" class="help">
              At least 10 characters (at most 200). A long passphrase is best.
            </p>
          )}
          {error && (
            <p class="notice notice-error" role="alert">
              {error}
            </p>
          )}
          <button type="submit" class="primary wide" disabled={busy}>
            {busy ? 'Please wait…' : signup ? 'Create account' : 'Sign in'}
          </button>
        </form>
        <p class="switch">
          {signup ? (
            <>
              Already have an account? <Link to="/signin">Sign in</Link>
            </>
          ) : (
            <>
              New to Kiln? <Link to="/signup">Create an account</Link>
            </>
          )}
        </p>
      </div>
    </main>
  );
}

function authError(err: unknown): string {
  if (err instanceof ApiError) {
    if (err.code === 'invalid_credentials') return 'That email and password do not match an account.';
    if (err.code === 'email_taken') return 'An account with this email exists. Sign in instead.';
    if (err.code === 'account_disabled') return 'This account is disabled. Contact the operator.';
  }
  return describeError(err);
}
