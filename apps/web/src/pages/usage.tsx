import { useState } from 'preact/hooks';
import { api, describeError, Key, Usage } from '../api';
import { refreshAccount, useSession } from '../session';
import { Empty, ErrorState, FiguresTable, formatNumber, Loading, PageTitle, useLoad } from '../ui';

type Breakdown = Usage['byKeyAndModel'][number];

interface Row {
  id: string;
  label: string;
  batches: number;
  images: number;
  credits: number;
}

/** Rows summed by a key of each breakdown row, most credits first. */
export function sumBy(rows: Breakdown[], key: (r: Breakdown) => string, label: (id: string) => string): Row[] {
  const out = new Map<string, Row>();
  for (const r of rows) {
    const id = key(r);
    const row = out.get(id) ?? { id, label: label(id), batches: 0, images: 0, credits: 0 };
    row.batches += r.batches;
    row.images += r.succeeded;
    row.credits += r.charged - r.refunded;
    out.set(id, row);
  }
  return [...out.values()].sort((a, b) => b.credits - a.credits || a.label.localeCompare(b.label));
}

function UsageTable({ caption, head, rows }: { caption: string; head: string; rows: Row[] }) {
  return (
    <FiguresTable
      class="usage-table"
      caption={caption}
      columns={[head, 'Batches', 'Images made', 'Credits spent']}
      rows={rows.map((r) => ({ key: r.id, label: r.label, figures: [r.batches, r.images, r.credits] }))}
    />
  );
}

/** The last 30 days' batches per API key and per model: images made and credits spent (net of refunds). */
export function UsagePage() {
  const data = useLoad(() =>
    Promise.all([
      api<Usage>('GET', '/usage?days=30'),
      api<{ keys: Key[] }>('GET', '/keys').then(
        (r) => r.keys,
        () => [] as Key[],
      ),
    ]),
  );
  const [usage, keys] = data.data ?? [undefined, []];
  const keyName = (id: string) => {
    if (id === '') return 'Dashboard (no key)';
    const k = keys.find((x) => x.id === id);
    return k ? `${k.name} (${k.hint})${k.revokedAt ? ', revoked' : ''}` : `Key ${id.slice(0, 8)}`;
  };
  return (
    <section>
      <PageTitle>Usage</PageTitle>
      <p class="lead">The batches created in the last 30 UTC days: images made so far and credits spent (charged less refunded).</p>
      {data.loading && !data.data && <Loading label="Loading usage…" />}
      {data.error !== undefined && <ErrorState error={data.error} onRetry={data.reload} />}
      <LowCreditsForm />
      {usage && usage.byKeyAndModel.length === 0 && <Empty title="No batches in the last 30 days." />}
      {usage && usage.byKeyAndModel.length > 0 && (
        <>
          <UsageTable caption="Per API key" head="Key" rows={sumBy(usage.byKeyAndModel, (r) => r.keyId ?? '', keyName)} />
          <UsageTable
            caption="Per model"
            head="Model"
            rows={sumBy(
              usage.byKeyAndModel,
              (r) => r.model,
              (m) => m,
            )}
          />
        </>
      )}
    </section>
  );
}

/** The balance below which a batch charge sends a `credits.low` webhook event; empty for none. */
function LowCreditsForm() {
  const session = useSession();
  const current = session.kind === 'signed-in' ? session.info.account.lowCreditsThreshold : null;
  const [value, setValue] = useState(current === null ? '' : String(current));
  const [message, setMessage] = useState<{ ok: boolean; text: string } | null>(null);
  const [saving, setSaving] = useState(false);
  const save = async (e: Event) => {
    e.preventDefault();
    const n = Number(value);
    if (value.trim() !== '' && !(Number.isInteger(n) && n >= 1))
      return setMessage({ ok: false, text: 'A whole number of credits, at least 1.' });
    setSaving(true);
    try {
      await api('PATCH', '/account', { body: { lowCreditsThreshold: value.trim() === '' ? null : n } });
      await refreshAccount();
      setMessage({ ok: true, text: value.trim() === '' ? 'No low-credit alert.' : `Alert below ${formatNumber(n)} credits saved.` });
    } catch (err) {
      setMessage({ ok: false, text: describeError(err) });
    } finally {
      setSaving(false);
    }
  };
  return (
    <form class="card low-credits" onSubmit={(e) => void save(e)}>
      <h2>Low-credit alert</h2>
      <label for="low-credits">Alert when the balance falls below (credits)</label>
      <div class="inline-field">
        <input
          id="low-credits"
          type="number"
          min={1}
          step={1}
          inputMode="numeric"
          value={value}
          onInput={(e) => setValue(e.currentTarget.value)}
          aria-describedby="low-credits-help"
        />
        <button type="submit" class="primary" disabled={saving}>
          Save
        </button>
      </div>
      <p id="low-credits-help" class="help">
        A batch charge that takes the balance below it sends a <code>credits.low</code> webhook event. Empty: no alert.
      </p>
      {message && (
        <p class={message.ok ? 'notice notice-success' : 'notice notice-error'} role={message.ok ? 'status' : 'alert'}>
          {message.text}
        </p>
      )}
    </form>
  );
}
