import { useState } from 'preact/hooks';
import { api, ApiError, Delivery, describeError, Endpoint, WEBHOOK_EVENTS } from '../api';
import { CheckboxGroup, ConfirmDialog, Empty, ErrorState, formatDate, Loading, PageTitle, SecretOnce, StatusBadge, useLoad } from '../ui';

export function WebhooksPage() {
  const endpoints = useLoad(() => api<{ endpoints: Endpoint[] }>('GET', '/webhooks').then((r) => r.endpoints));
  const [secret, setSecret] = useState<{ label: string; value: string } | null>(null);
  const [removing, setRemoving] = useState<Endpoint | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const [actionError, setActionError] = useState<unknown>(undefined);

  const act = async (fn: () => Promise<void>) => {
    setActionError(undefined);
    try {
      await fn();
    } catch (err) {
      setActionError(err);
    }
  };
  const remove = () => {
    const ep = removing!;
    setRemoving(null);
    void act(async () => {
      await api('DELETE', `/webhooks/${ep.id}`);
      endpoints.reload();
    });
  };
  const rotate = (ep: Endpoint) =>
    act(async () => {
      const r = await api<{ secret: string }>('POST', `/webhooks/${ep.id}/rotate-secret`);
      setSecret({ label: `New signing secret of ${ep.url}`, value: r.secret });
    });

  return (
    <section>
      <PageTitle>Webhooks</PageTitle>
      <p class="lead">Kiln POSTs signed events (Standard Webhooks) to your endpoints, so your programs need not poll.</p>
      <CreateEndpointForm
        onCreated={(ep, value) => {
          setSecret({ label: `Signing secret of ${ep.url}`, value });
          endpoints.reload();
        }}
      />
      {secret && <SecretOnce label={secret.label} secret={secret.value} onDone={() => setSecret(null)} />}
      {actionError !== undefined && <ErrorState error={actionError} />}
      <h2>Endpoints</h2>
      {endpoints.loading && !endpoints.data && <Loading />}
      {endpoints.error !== undefined && <ErrorState error={endpoints.error} onRetry={endpoints.reload} />}
      {endpoints.data?.length === 0 && <Empty title="No endpoints yet." />}
      <ul class="endpoints">
        {endpoints.data?.map((ep) => (
          <li key={ep.id} class="card endpoint">
            <div class="endpoint-head">
              <div>
                <p class="mono endpoint-url">{ep.url}</p>
                <p class="help">
                  {ep.events.join(', ')}
                  {ep.description && ` · ${ep.description}`} · added {formatDate(ep.createdAt)}
                  {ep.disabledAt && ` · disabled ${formatDate(ep.disabledAt)} (answered 410)`}
                </p>
              </div>
              <div class="actions">
                <button
                  type="button"
                  class="small"
                  onClick={() => void act(() => api('POST', `/webhooks/${ep.id}/test`).then(() => setOpen(ep.id)))}
                >
                  Send test ping
                </button>
                <button type="button" class="small" aria-expanded={open === ep.id} onClick={() => setOpen(open === ep.id ? null : ep.id)}>
                  Delivery log
                </button>
                <button type="button" class="small" onClick={() => void rotate(ep)}>
                  Rotate secret
                </button>
                <button type="button" class="small danger" onClick={() => setRemoving(ep)} aria-label={`Delete ${ep.url}`}>
                  Delete
                </button>
              </div>
            </div>
            {open === ep.id && <DeliveryLog endpointId={ep.id} />}
          </li>
        ))}
      </ul>
      <ConfirmDialog
        open={removing !== null}
        title="Delete this endpoint?"
        confirmLabel="Delete endpoint"
        danger
        onConfirm={remove}
        onCancel={() => setRemoving(null)}
      >
        <p>
          <span class="mono">{removing?.url}</span> receives nothing more, and its delivery log goes with it.
        </p>
      </ConfirmDialog>
    </section>
  );
}

function CreateEndpointForm({ onCreated }: { onCreated: (ep: Endpoint, secret: string) => void }) {
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [events, setEvents] = useState<string[]>(['batch.completed']);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    if (events.length === 0) return setError('Choose at least one event.');
    setBusy(true);
    try {
      const r = await api<{ endpoint: Endpoint; secret: string }>('POST', '/webhooks', {
        body: { url: url.trim(), events, description: description.trim() || undefined },
      });
      setUrl('');
      setDescription('');
      onCreated(r.endpoint, r.secret);
    } catch (err) {
      setError(
        err instanceof ApiError && err.code === 'endpoint_limit_exceeded' ? 'At most 10 endpoints: delete one first.' : describeError(err),
      );
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" onSubmit={(e) => void submit(e)} aria-labelledby="new-endpoint">
      <h2 id="new-endpoint">New endpoint</h2>
      <div class="row">
        <div class="field grow">
          <label for="hook-url">URL</label>
          <input
            id="hook-url"
            type="url"
            required
            value={url}
            onInput={(e) => setUrl(e.currentTarget.value)}
            placeholder="https://example.com/kiln-events"
          />
        </div>
        <div class="field">
          <label for="hook-description">Description</label>
          <input id="hook-description" maxLength={200} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
        </div>
      </div>
      <CheckboxGroup legend="Events" options={WEBHOOK_EVENTS} chosen={events} onChange={setEvents} />
      {error && (
        <p class="notice notice-error" role="alert">
          {error}
        </p>
      )}
      <button type="submit" class="primary" disabled={busy}>
        {busy ? 'Adding…' : 'Add endpoint'}
      </button>
    </form>
  );
}

function DeliveryLog({ endpointId }: { endpointId: string }) {
  const log = useLoad(
    () => api<{ deliveries: Delivery[] }>('GET', `/webhooks/${endpointId}/deliveries?limit=20`).then((r) => r.deliveries),
    [endpointId],
  );
  return (
    <div class="deliveries">
      <div class="title-row">
        <h3>Recent deliveries</h3>
        <button type="button" class="small" onClick={log.reload}>
          Refresh
        </button>
      </div>
      {log.loading && !log.data && <Loading />}
      {log.error !== undefined && <ErrorState error={log.error} onRetry={log.reload} />}
      {log.data?.length === 0 && <p class="muted">No deliveries yet.</p>}
      {log.data && log.data.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last answer</th>
                <th scope="col">Delivered</th>
              </tr>
            </thead>
            <tbody>
              {log.data.map((d) => (
                <tr key={d.id}>
                  <td class="mono">{d.type}</td>
                  <td>
                    <StatusBadge status={d.status} />
                  </td>
                  <td>{d.attempts}</td>
                  <td>{d.lastStatusCode ?? d.lastError ?? '—'}</td>
                  <td>{formatDate(d.deliveredAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
