import { useEffect, useState } from 'preact/hooks';
import { api, Batch } from '../api';
import { Link } from '../router';
import { Empty, ErrorState, formatDate, formatNumber, Loading, PageTitle, StatusBadge } from '../ui';

const PAGE = 20;

/** The account's batches, newest first, a page at a time by cursor. */
export function BatchesPage() {
  const [batches, setBatches] = useState<Batch[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<unknown>(undefined);

  const load = async (after: string | null) => {
    setLoading(true);
    setError(undefined);
    try {
      const q = `/batches?limit=${PAGE}` + (after ? `&cursor=${encodeURIComponent(after)}` : '');
      const page = await api<{ batches: Batch[]; nextCursor: string | null }>('GET', q);
      setBatches((prev) => (after ? [...prev, ...page.batches] : page.batches));
      setCursor(page.nextCursor);
    } catch (err) {
      setError(err);
    } finally {
      setLoading(false);
    }
  };
  useEffect(() => void load(null), []);

  return (
    <section>
      <div class="title-row">
        <PageTitle>Batches</PageTitle>
        <Link to="/batches/new" class="button primary">
          New batch
        </Link>
      </div>
      {!loading && !error && batches.length === 0 && (
        <Empty title="No batches yet.">
          <p>
            <Link to="/batches/new">Create your first batch</Link>: prompts in, images out.
          </p>
        </Empty>
      )}
      <ul class="batch-list" aria-label="Batches, newest first">
        {batches.map((b) => (
          <li key={b.id} class="batch-item">
            <Link to={`/batches/${b.id}`} class="batch-link">
              {b.previewUrl ? (
                <img src={b.previewUrl} alt="" width={72} height={72} loading="lazy" decoding="async" class="thumb" />
              ) : (
                <span class="thumb thumb-empty" aria-hidden="true" />
              )}
              <span class="batch-main">
                <span class="batch-title">{b.note ?? b.prompts[0]}</span>
                <span class="batch-meta">
                  {b.model} · {b.aspectRatio} · {b.resolution} · {formatDate(b.createdAt)}
                </span>
              </span>
              <span class="batch-side">
                <StatusBadge status={b.status} />
                <span class="counts">
                  {formatNumber(b.counts.succeeded)}/{formatNumber(b.total)} done
                  {b.counts.failed > 0 && `, ${b.counts.failed} failed`}
                  {b.counts.cancelled > 0 && `, ${b.counts.cancelled} cancelled`}
                </span>
              </span>
            </Link>
          </li>
        ))}
      </ul>
      {loading && <Loading label="Loading batches…" />}
      {error !== undefined && <ErrorState error={error} onRetry={() => void load(batches.length ? cursor : null)} />}
      {!loading && cursor && (
        <button type="button" onClick={() => void load(cursor)}>
          Load more
        </button>
      )}
    </section>
  );
}
