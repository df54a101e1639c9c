import { useEffect, useRef, useState } from 'preact/hooks';
import { api, Batch, Catalog } from '../api';
import { currentPath, Link, navigate, onNavigate } from '../router';
import { Empty, ErrorState, formatDate, formatNumber, Loading, PageTitle, StatusBadge } from '../ui';

const PAGE = 20;
const STATUSES = ['pending', 'running', 'succeeded', 'partial', 'failed', 'cancelled'];

interface Filters {
  q: string;
  status: string;
  model: string;
  from: string;
  to: string;
}
const NO_FILTERS: Filters = { q: '', status: '', model: '', from: '', to: '' };
const FILTER_KEYS = ['q', 'status', 'model', 'from', 'to'] as const;

/** The filters set, as query parameters (the page's own URL and the list's query share them). */
function filterParams(f: Filters, params = new URLSearchParams()): URLSearchParams {
  for (const k of FILTER_KEYS) if (f[k].trim()) params.set(k, f[k].trim());
  return params;
}

/** The list's query: the filters set, then the page. */
export function batchesQuery(f: Filters, after: string | null): string {
  const params = filterParams(f, new URLSearchParams({ limit: String(PAGE) }));
  if (after) params.set('cursor', after);
  return `/batches?${params.toString()}`;
}

/** The filters a page URL's query string keeps (so reload, back and a shared link keep them). */
export function filtersFromSearch(search: string): Filters {
  const params = new URLSearchParams(search);
  const f = { ...NO_FILTERS };
  for (const k of FILTER_KEYS) f[k] = params.get(k) ?? '';
  return f;
}

/** The page's query string for these filters: empty without any. */
export function filtersSearch(f: Filters): string {
  const query = filterParams(f).toString();
  return query ? `?${query}` : '';
}

/** The account's batches, newest first, a page at a time by cursor; filtered by status, model, dates and text. */
export function BatchesPage() {
  const [batches, setBatches] = useState<Batch[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<unknown>(undefined);
  const [draft, setDraft] = useState<Filters>(() => filtersFromSearch(location.search));
  const [filters, setFilters] = useState<Filters>(() => filtersFromSearch(location.search));
  const [models, setModels] = useState<Catalog['models']>([]);
  useEffect(() => {
    api<Catalog>('GET', '/models').then(
      (c) => setModels(c.models),
      () => setModels([]),
    );
  }, []);
  const filtered = (Object.values(filters) as string[]).some((v) => v.trim() !== '');

  // Only the latest load answers: back and forward in quick succession may overtake each other.
  const latest = useRef(0);
  const load = async (after: string | null, f: Filters = filters) => {
    const mine = ++latest.current;
    setLoading(true);
    setError(undefined);
    try {
      const q = batchesQuery(f, after);
      const page = await api<{ batches: Batch[]; nextCursor: string | null }>('GET', q);
      if (mine !== latest.current) return;
      setBatches((prev) => (after ? [...prev, ...page.batches] : page.batches));
      setCursor(page.nextCursor);
    } catch (err) {
      if (mine === latest.current) setError(err);
    } finally {
      if (mine === latest.current) setLoading(false);
    }
  };
  // What the list shows, for the URL listener (its closure outlives renders).
  const shown = useRef(filtersSearch(filters));
  const show = (f: Filters) => {
    shown.current = filtersSearch(f);
    setDraft(f);
    setFilters(f);
    setBatches([]);
    void load(null, f);
  };
  useEffect(() => {
    void load(null);
    // Back, forward and the nav's link move between filter sets: the URL says which.
    return onNavigate(() => {
      if (currentPath() === '/batches' && location.search !== shown.current) show(filtersFromSearch(location.search));
    });
  }, []);
  const apply = (f: Filters) => {
    show(f);
    if (shown.current !== location.search) navigate(`/batches${shown.current}`);
  };
  const field = (k: keyof Filters) => ({
    value: draft[k],
    onInput: (e: Event) => setDraft({ ...draft, [k]: (e.currentTarget as HTMLInputElement).value }),
  });

  return (
    <section>
      <div class="title-row">
        <PageTitle>Batches</PageTitle>
        <Link to="/batches/new" class="button primary">
          New batch
        </Link>
      </div>
      <form
        class="filters card"
        role="search"
        aria-label="Filter batches"
        onSubmit={(e) => {
          e.preventDefault();
          apply(draft);
        }}
      >
        <div class="row">
          <div class="field grow">
            <label for="f-q">Search note and prompts</label>
            <input id="f-q" type="search" maxLength={200} placeholder="e.g. lighthouse" {...field('q')} />
          </div>
          <div class="field">
            <label for="f-status">Status</label>
            <select id="f-status" {...field('status')} onChange={(e) => setDraft({ ...draft, status: e.currentTarget.value })}>
              <option value="">Any</option>
              {STATUSES.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </div>
          <div class="field">
            <label for="f-model">Model</label>
            <select id="f-model" {...field('model')} onChange={(e) => setDraft({ ...draft, model: e.currentTarget.value })}>
              <option value="">Any</option>
              {models.map((m) => (
                <option key={m.key} value={m.key}>
                  {m.displayName}
                </option>
              ))}
            </select>
          </div>
          <div class="field">
            <label for="f-from">From (UTC day)</label>
            <input id="f-from" type="date" {...field('from')} />
          </div>
          <div class="field">
            <label for="f-to">To (UTC day)</label>
            <input id="f-to" type="date" {...field('to')} />
          </div>
        </div>
        <div class="actions filter-actions">
          <button type="submit" class="primary">
            Filter
          </button>
          {filtered && (
            <button type="button" onClick={() => apply(NO_FILTERS)}>
              Clear filters
            </button>
          )}
        </div>
      </form>
      {!loading && !error && batches.length === 0 && filtered && (
        <Empty title="No batch matches these filters.">
          <p>Change or clear them to see more.</p>
        </Empty>
      )}
      {!loading && !error && batches.length === 0 && !filtered && (
        <Empty title="No batches yet.">
          <p>
            <Link to="/batches/new">Create your first batch</Link>: prompts in, images out.
          </p>
        </Empty>
      )}
      <ul class="batch-list" aria-label={filtered ? 'Batches matching the filters, newest first' : 'Batches, newest first'}>
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
