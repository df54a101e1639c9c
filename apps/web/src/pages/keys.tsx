import { useState } from 'preact/hooks';
import { api, ApiError, describeError, Key, SCOPES } from '../api';
import { useSession } from '../session';
import { CheckboxGroup, ConfirmDialog, Empty, ErrorState, formatDate, formatNumber, Loading, Notice, PageTitle, SecretOnce, useLoad } from '../ui';

export function KeysPage() {
  const session = useSession();
  const keys = useLoad(() => api<{ keys: Key[] }>('GET', '/keys').then((r) => r.keys));
  const [secret, setSecret] = useState<{ name: string; value: string } | null>(null);
  const [revoking, setRevoking] = useState<Key | null>(null);
  const [actionError, setActionError] = useState<unknown>(null);
  if (session.kind !== 'signed-in') return null;
  const { limits, account } = session.info;
  const active = (keys.data ?? []).filter((k) => k.revokedAt === null).length;

  const revoke = async () => {
    const key = revoking!;
    setRevoking(null);
    try {
      await api('DELETE', `/keys/${key.id}`);
      keys.reload();
    } catch (err) {
      setActionError(err);
    }
  };

  return (
    <section>
      <PageTitle>API keys</PageTitle>
      <p class="lead">Keys let your programs call Kiln's API. Each key can be limited to some scopes and a daily credit cap.</p>
      {limits.maxKeys === 0 ? (
        <Notice kind="info">
          <strong>Your plan ({account.plan}) allows no API keys.</strong> An operator can move your account to a paid plan; the dashboard keeps
          working meanwhile.
        </Notice>
      ) : (
        <CreateKeyForm
          disabled={active >= limits.maxKeys}
          limitText={`${active} of ${limits.maxKeys} keys in use`}
          onCreated={(name, value) => {
            setSecret({ name, value });
            keys.reload();
          }}
        />
      )}
      {secret && <SecretOnce label={`Secret of the key “${secret.name}”`} secret={secret.value} onDone={() => setSecret(null)} />}
      {actionError !== null && <ErrorState error={actionError} />}
      <h2>Your keys</h2>
      {keys.loading && !keys.data && <Loading />}
      {keys.error !== undefined && <ErrorState error={keys.error} onRetry={keys.reload} />}
      {keys.data && keys.data.length === 0 && <Empty title="No keys yet." />}
      {keys.data && keys.data.length > 0 && (
        <div class="table-wrap">
          <table class="keys">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Key</th>
                <th scope="col">Scopes</th>
                <th scope="col">Daily cap</th>
                <th scope="col">Used today</th>
                <th scope="col">Last used</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {keys.data.map((k) => (
                <tr key={k.id} class={k.revokedAt ? 'revoked' : undefined}>
                  <td>{k.name}</td>
                  <td class="mono">{k.hint}</td>
                  <td class="scopes">{k.scopes.length === SCOPES.length ? 'all' : k.scopes.join(', ')}</td>
                  <td>{k.creditCapPerDay === null ? 'none' : formatNumber(k.creditCapPerDay)}</td>
                  <td>{formatNumber(k.creditsUsedToday)}</td>
                  <td>{formatDate(k.lastUsedAt)}</td>
                  <td>
                    {k.revokedAt ? (
                      <span class="badge badge-cancelled">revoked</span>
                    ) : (
                      <button type="button" class="danger small" onClick={() => setRevoking(k)} aria-label={`Revoke ${k.name}`}>
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <ConfirmDialog
        open={revoking !== null}
        title="Revoke this key?"
        confirmLabel="Revoke key"
        danger
        onConfirm={revoke}
        onCancel={() => setRevoking(null)}
      >
        <p>
          Programs using <strong>{revoking?.name}</strong> ({revoking?.hint}) are refused from their next request. This cannot be undone.
        </p>
      </ConfirmDialog>
    </section>
  );
}

function CreateKeyForm({ disabled, limitText, onCreated }: { disabled: boolean; limitText: string; onCreated: (name: string, secret: string) => void }) {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<string[]>(SCOPES);
  const [cap, setCap] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    if (scopes.length === 0) return setError('Choose at least one scope.');
    setBusy(true);
    try {
      const body = { name: name.trim(), scopes, creditCapPerDay: cap === '' ? null : Number(cap) };
      const res = await api<{ key: Key; secret: string }>('POST', '/keys', { body });
      setName('');
      setCap('');
      onCreated(res.key.name, res.secret);
    } catch (err) {
      setError(err instanceof ApiError && err.code === 'key_limit_exceeded' ? 'Your plan allows no more keys: revoke one first.' : describeError(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card" onSubmit={submit} aria-labelledby="new-key">
      <h2 id="new-key">New key</h2>
      <p class="help">{limitText}</p>
      <div class="row">
        <div class="field">
          <label for="key-name">Name</label>
          <input id="key-name" required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} placeholder="e.g. ci" />
        </div>
        <div class="field">
          <label for="key-cap">Daily credit cap</label>
          <input
            id="key-cap"
            type="number"
            min={1}
            max={2147483647}
            step={1}
            inputMode="numeric"
            value={cap}
            aria-describedby="key-cap-help"
            onInput={(e) => setCap(e.currentTarget.value)}
          />
          <p id="key-cap-help" class="help">
            Empty: no cap.
          </p>
        </div>
      </div>
      <CheckboxGroup legend="Scopes" options={SCOPES} chosen={scopes} onChange={setScopes} />
      {error && (
        <p class="notice notice-error" role="alert">
          {error}
        </p>
      )}
      <button type="submit" class="primary" disabled={busy || disabled}>
        {busy ? 'Creating…' : 'Create key'}
      </button>
    </form>
  );
}
