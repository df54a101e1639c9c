import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, Catalog, describeError, Key, SCOPES } from '../api';
import { useSession } from '../session';
import {
  CheckboxGroup,
  ConfirmDialog,
  Empty,
  ErrorState,
  formatDate,
  formatNumber,
  Loading,
  Notice,
  PageTitle,
  SecretOnce,
  useLoad,
} from '../ui';

export function KeysPage() {
  const session = useSession();
  const keys = useLoad(() => api<{ keys: Key[] }>('GET', '/keys').then((r) => r.keys));
  const [secret, setSecret] = useState<{ name: string; value: string } | null>(null);
  const [revoking, setRevoking] = useState<Key | null>(null);
  const [editing, setEditing] = useState<Key | null>(null);
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
          <strong>Your plan ({account.plan}) allows no API keys.</strong> An operator can move your account to a paid plan; the dashboard
          keeps working meanwhile.
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
                <th scope="col">Budget (spent / credits)</th>
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
                  <td>
                    {k.name}
                    <span class="mono key-hint key-hint-inline">{k.hint}</span>
                  </td>
                  <td>
                    <span class="mono key-hint">{k.hint}</span>
                  </td>
                  <td class="scopes">{k.scopes.length === SCOPES.length ? 'all' : k.scopes.join(', ')}</td>
                  <td>
                    {k.budget ? `${formatNumber(k.budget.spent)} / ${formatNumber(k.budget.credits)} per ${k.budget.period}` : 'none'}
                    {k.models.length > 0 && <span class="key-models">{k.models.join(', ')} only</span>}
                  </td>
                  <td>{formatNumber(k.creditsUsedToday)}</td>
                  <td>{formatDate(k.lastUsedAt)}</td>
                  <td>
                    {k.revokedAt ? (
                      <span class="badge badge-cancelled">revoked</span>
                    ) : (
                      <span class="row-actions">
                        <button type="button" class="small" onClick={() => setEditing(k)} aria-label={`Limits of ${k.name}`}>
                          Limits
                        </button>
                        <button type="button" class="danger small" onClick={() => setRevoking(k)} aria-label={`Revoke ${k.name}`}>
                          Revoke
                        </button>
                      </span>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {editing && (
        <KeyLimitsDialog
          keyRow={editing}
          onDone={(changed) => {
            setEditing(null);
            if (changed) keys.reload();
          }}
        />
      )}
      <ConfirmDialog
        open={revoking !== null}
        title="Revoke this key?"
        confirmLabel="Revoke key"
        danger
        onConfirm={() => void revoke()}
        onCancel={() => setRevoking(null)}
      >
        <p>
          Programs using <strong>{revoking?.name}</strong> ({revoking?.hint}) are refused from their next request. This cannot be undone.
        </p>
      </ConfirmDialog>
    </section>
  );
}

function CreateKeyForm({
  disabled,
  limitText,
  onCreated,
}: {
  disabled: boolean;
  limitText: string;
  onCreated: (name: string, secret: string) => void;
}) {
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
      setError(
        err instanceof ApiError && err.code === 'key_limit_exceeded'
          ? 'Your plan allows no more keys: revoke one first.'
          : describeError(err),
      );
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card" onSubmit={(e) => void submit(e)} aria-labelledby="new-key">
      <h2 id="new-key">New key</h2>
      <p class="help">{limitText}</p>
      <div class="row">
        <div class="field">
          <label for="key-name">Name</label>
          <input
            id="key-name"
            required
            maxLength={100}
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
            placeholder="e.g. ci"
          />
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

/** A key's budget (credits per UTC day, week or month, or none) and its models allowlist (none: every model). */
function KeyLimitsDialog({ keyRow, onDone }: { keyRow: Key; onDone: (changed: boolean) => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const [credits, setCredits] = useState(keyRow.budget ? String(keyRow.budget.credits) : '');
  const [period, setPeriod] = useState<string>(keyRow.budget?.period ?? 'month');
  const [models, setModels] = useState<string[]>(keyRow.models);
  const [catalog, setCatalog] = useState<string[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  useEffect(() => {
    ref.current?.showModal();
    api<Catalog>('GET', '/models').then(
      (c) => setCatalog([...new Set([...c.models.map((m) => m.key), ...keyRow.models])]),
      () => setCatalog(keyRow.models),
    );
  }, []);
  const save = async (e: Event) => {
    e.preventDefault();
    const n = Number(credits);
    if (credits.trim() !== '' && !(Number.isInteger(n) && n >= 1)) return setError('The budget is a whole number of credits, at least 1.');
    setSaving(true);
    setError(null);
    try {
      await api('PATCH', `/keys/${keyRow.id}`, { body: { budget: credits.trim() === '' ? null : { credits: n, period }, models } });
      onDone(true);
    } catch (err) {
      setError(describeError(err));
    } finally {
      setSaving(false);
    }
  };
  return (
    <dialog ref={ref} class="dialog key-limits" aria-labelledby="limits-title" onClose={() => onDone(false)}>
      <form noValidate onSubmit={(e) => void save(e)}>
        <h2 id="limits-title">Limits of “{keyRow.name}”</h2>
        <div class="row">
          <div class="field">
            <label for="budget-credits">Budget (credits)</label>
            <input
              id="budget-credits"
              type="number"
              min={1}
              step={1}
              inputMode="numeric"
              value={credits}
              onInput={(e) => {
                setCredits(e.currentTarget.value);
                setError(null);
              }}
              aria-describedby="budget-help"
            />
          </div>
          <div class="field">
            <label for="budget-period">Per</label>
            <select id="budget-period" value={period} onChange={(e) => setPeriod(e.currentTarget.value)}>
              <option value="day">UTC day</option>
              <option value="week">UTC week</option>
              <option value="month">UTC month</option>
            </select>
          </div>
        </div>
        <p id="budget-help" class="help">
          Empty: no budget. A batch that would take the key past it is refused.
          {keyRow.budget && ` Spent this ${keyRow.budget.period}: ${formatNumber(keyRow.budget.spent)}.`}
        </p>
        <CheckboxGroup legend="Models (none checked: every model)" options={catalog} chosen={models} onChange={setModels} />
        {error && (
          <p class="notice notice-error" role="alert">
            {error}
          </p>
        )}
        <div class="actions">
          <button type="button" onClick={() => onDone(false)}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={saving}>
            Save limits
          </button>
        </div>
      </form>
    </dialog>
  );
}
