import { Component } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, Batch, describeError, request, Task } from '../api';
import { Link } from '../router';
import { refreshAccount } from '../session';
import { ConfirmDialog, ErrorState, formatDate, formatNumber, Loading, PageTitle, StatusBadge } from '../ui';

/** How long the api may hold one poll (Prefer: wait); the request's own timeout is longer. */
const WAIT_SECONDS = 25;
/** Tiles rendered at first, and added each time the end of the grid scrolls into view. */
const TILE_STEP = 60;

interface Detail {
  batch: Batch;
  tasks: Task[];
}

/**
 * Follows a batch live. One GET for the whole batch, then its progress stream
 * (EventSource on /batches/{id}/events): each task's final state and the batch's counts as
 * they happen, the browser reconnecting with Last-Event-ID on its own after a drop. Where the
 * stream is refused (an older api answers 404) or EventSource is missing, it long-polls
 * instead: GET with `Prefer: wait` and `If-None-Match`, so the api answers as soon as anything
 * changes (200) or after the wait (304), until the batch is done. A failed poll (503,
 * network) is retried after a pause, with the error shown meanwhile.
 */
function useLiveBatch(id: string) {
  const [detail, setDetail] = useState<Detail | null>(null);
  const [error, setError] = useState<unknown>(undefined);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const stop = new AbortController();
    let etag: string | null = null;
    let done = false;
    let source: EventSource | null = null;
    const path = `/batches/${encodeURIComponent(id)}`;
    const finished = (): void => {
      done = true;
      source?.close();
      void refreshAccount();
    };
    const poll = async (): Promise<void> => {
      while (!stop.signal.aborted && !done) {
        try {
          const headers: Record<string, string> = etag ? { 'If-None-Match': etag, Prefer: `wait=${WAIT_SECONDS}` } : {};
          const res = await request('GET', path, { headers, signal: stop.signal, timeoutMs: (WAIT_SECONDS + 15) * 1000 });
          if (res.status === 200) {
            const body = (await res.json()) as Detail;
            etag = res.headers.get('ETag');
            setDetail(body);
            setError(undefined);
            if (body.batch.done) finished();
            else if (source === null && typeof EventSource !== 'undefined') return follow();
          }
        } catch (err) {
          if (stop.signal.aborted) return;
          setError(err);
          if (err instanceof ApiError && (err.status === 404 || err.status === 401)) return;
          await new Promise((r) => setTimeout(r, 3000));
        }
      }
    };
    const follow = (): void => {
      const es = new EventSource(`/v1/dashboard${path}/events`);
      source = es;
      es.addEventListener('task', (e) => {
        const task = JSON.parse((e as MessageEvent<string>).data) as Task;
        setDetail((d) => d && { ...d, tasks: d.tasks.map((t) => (t.id === task.id ? task : t)) });
      });
      es.addEventListener('batch', (e) => {
        const batch = JSON.parse((e as MessageEvent<string>).data) as Batch;
        setDetail((d) => d && { ...d, batch });
        setError(undefined);
        if (batch.done) finished();
      });
      // CONNECTING: the browser is already reconnecting. CLOSED: the stream was refused, so
      // the page long-polls instead (from a fresh read, so nothing missed meanwhile is lost).
      es.onerror = () => {
        if (es.readyState !== EventSource.CLOSED || done || stop.signal.aborted) return;
        etag = null;
        void poll();
      };
    };
    void poll();
    return () => {
      stop.abort();
      source?.close();
    };
  }, [id, tick]);
  return { detail, error, restart: () => setTick((t) => t + 1) };
}

export function BatchPage({ id }: { id: string }) {
  const { detail, error, restart } = useLiveBatch(id);
  const [viewing, setViewing] = useState<number | null>(null);
  const [confirmCancel, setConfirmCancel] = useState(false);
  const [cancelError, setCancelError] = useState<unknown>(undefined);

  if (!detail) {
    return (
      <section>
        <PageTitle>Batch</PageTitle>
        {error === undefined ? <Loading label="Loading the batch…" /> : <ErrorState error={error} onRetry={restart} />}
      </section>
    );
  }
  const { batch, tasks } = detail;
  const images = tasks.filter((t) => t.status === 'succeeded' && t.resultUrls.length > 0);
  const failed = tasks.filter((t) => t.status === 'failed');

  const cancel = async () => {
    setConfirmCancel(false);
    setCancelError(undefined);
    try {
      await request('POST', `/batches/${batch.id}/cancel`);
    } catch (err) {
      setCancelError(err);
    }
  };

  return (
    <section>
      <p class="crumbs">
        <Link to="/batches">Batches</Link> /
      </p>
      <div class="title-row">
        <PageTitle>{batch.note ?? `Batch ${batch.id.slice(0, 8)}`}</PageTitle>
        <StatusBadge status={batch.status} />
      </div>
      {error !== undefined && <ErrorState error={error} />}
      <div class="progress-block" aria-live="polite">
        {/* Images ready, as the line under it says: counting failed and cancelled tasks filled the bar of a failed batch, which read as a success. */}
        <progress max={batch.total} value={batch.counts.succeeded} aria-label="Images ready" />
        <p data-testid="progress-text">
          {formatNumber(batch.counts.succeeded)} of {formatNumber(batch.total)} images ready
          {batch.counts.running > 0 && `, ${batch.counts.running} rendering`}
          {(batch.counts.cancelling ?? 0) > 0 && ` (${batch.counts.cancelling} of them being cancelled upstream)`}
          {batch.counts.pending > 0 && `, ${batch.counts.pending} waiting`}
          {batch.counts.failed > 0 && `, ${batch.counts.failed} failed`}
          {batch.counts.cancelled > 0 && `, ${batch.counts.cancelled} cancelled`}
          {batch.done ? '. Done.' : '…'}
        </p>
      </div>
      <div class="actions">
        {!batch.done && (
          <button type="button" class="danger" onClick={() => setConfirmCancel(true)}>
            Cancel batch
          </button>
        )}
        {images.length > 0 && (
          <a class="button" href={`/v1/dashboard/batches/${batch.id}/archive`} download={`kiln-${batch.id}.zip`}>
            Download zip
          </a>
        )}
      </div>
      {cancelError !== undefined && (
        <p class="notice notice-error" role="alert">
          {describeError(cancelError)}
        </p>
      )}
      <dl class="facts">
        <dt>Model</dt>
        <dd>{batch.model}</dd>
        <dt>Size</dt>
        <dd>
          {batch.aspectRatio} at {batch.resolution}
        </dd>
        <dt>Created</dt>
        <dd>{formatDate(batch.createdAt)}</dd>
        <dt>Credits</dt>
        <dd>
          {formatNumber(batch.creditsCharged)} charged{batch.creditsRefunded > 0 && `, ${formatNumber(batch.creditsRefunded)} refunded`}
        </dd>
        <dt>Prompts</dt>
        <dd>{batch.prompts.length === 1 ? batch.prompts[0] : `${batch.prompts.length} prompts`}</dd>
      </dl>
      <h2>Images</h2>
      <TaskGrid tasks={tasks} ratio={tileRatio(batch.aspectRatio, tasks)} onOpen={(i) => setViewing(i)} />
      {failed.length > 0 && (
        <>
          <h2>Failed tasks</h2>
          <ul class="failures">
            {failed.map((t) => (
              <li key={t.id}>
                <strong>#{t.index}</strong> <span class="prompt">{t.prompt}</span>: <span class="error-text">{t.error ?? 'failed'}</span>
                {t.errorCode && <span class="mono"> ({t.errorCode})</span>}
              </li>
            ))}
          </ul>
        </>
      )}
      <Viewer batch={batch} tasks={tasks} index={viewing} onClose={() => setViewing(null)} onMove={setViewing} />
      <ConfirmDialog
        open={confirmCancel}
        title="Cancel this batch?"
        confirmLabel="Cancel batch"
        danger
        onConfirm={() => void cancel()}
        onCancel={() => setConfirmCancel(false)}
      >
        <p>Tasks not started yet are cancelled and their credits refunded. Images already made stay.</p>
      </ConfirmDialog>
    </section>
  );
}

/** The tiles' aspect ratio: the batch's ("16:9"), else the first image made's, else square. */
export function tileRatio(aspectRatio: string, tasks: Task[]): string {
  const m = /^(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)$/.exec(aspectRatio);
  if (m) return `${m[1]} / ${m[2]}`;
  const made = tasks.find((t) => t.width && t.height);
  return made ? `${made.width} / ${made.height}` : '1';
}

/**
 * A grid that stays responsive at 1,000 images: tiles are added TILE_STEP at a time as the
 * end scrolls into view, images load lazily at their tile size, tiles off screen skip
 * rendering (content-visibility), and a tile re-renders only when its own task changed.
 */
function TaskGrid({ tasks, ratio, onOpen }: { tasks: Task[]; ratio: string; onOpen: (index: number) => void }) {
  const [shown, setShown] = useState(TILE_STEP);
  const end = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = end.current;
    if (!el || shown >= tasks.length) return;
    const io = new IntersectionObserver((entries) => entries.some((e) => e.isIntersecting) && setShown((s) => s + TILE_STEP), {
      rootMargin: '600px',
    });
    io.observe(el);
    return () => io.disconnect();
  }, [shown, tasks.length]);
  return (
    <>
      <ul class="grid" data-testid="image-grid" style={{ '--tile-ratio': ratio }}>
        {tasks.slice(0, shown).map((t, i) => (
          <Tile key={t.id} task={t} index={i} onOpen={onOpen} />
        ))}
      </ul>
      {shown < tasks.length && (
        <div ref={end} class="grid-more">
          <button type="button" onClick={() => setShown((s) => s + TILE_STEP * 4)}>
            Show more ({formatNumber(tasks.length - shown)} left)
          </button>
        </div>
      )}
    </>
  );
}

type TileProps = { task: Task; index: number; onOpen: (index: number) => void };

class Tile extends Component<TileProps> {
  shouldComponentUpdate(next: TileProps) {
    const a = this.props.task;
    const b = next.task;
    return (
      a.status !== b.status ||
      a.progress !== b.progress ||
      a.resultUrls[0] !== b.resultUrls[0] ||
      a.error !== b.error ||
      this.props.index !== next.index
    );
  }

  render({ task, index, onOpen }: TileProps) {
    const url = task.resultUrls[0];
    if (task.status === 'succeeded' && url) {
      return (
        <li class="tile">
          <button type="button" class="tile-button" onClick={() => onOpen(index)} aria-label={`Open image ${task.index}: ${task.prompt}`}>
            <img src={url} alt="" loading="lazy" decoding="async" width={task.width ?? 256} height={task.height ?? 256} />
          </button>
        </li>
      );
    }
    return (
      <li class={`tile tile-${task.status}`}>
        <span class="tile-state">
          {task.status === 'failed' ? (
            <>
              <strong>Failed</strong>
              <span class="tile-error">{task.error}</span>
            </>
          ) : task.status === 'running' ? (
            `Rendering ${task.progress}%`
          ) : (
            task.status
          )}
        </span>
      </li>
    );
  }
}

/** Task n renders with seed + n - 1, wrapping past 2^31 - 1 to 0 (docs/api.md); null: drawn from the batch id. */
export function taskSeed(seed: number | null, index: number): number | null {
  return seed === null ? null : (seed + index - 1) % 2_147_483_648;
}

/** From a worker taking the task to its end, as "4.2 s" (or "2 min 5 s"); null until it has ended. */
export function timeTaken(task: Pick<Task, 'startedAt' | 'finishedAt'>): string | null {
  if (task.startedAt == null || task.finishedAt == null) return null;
  const s = Math.max(0, task.finishedAt - task.startedAt) / 1000;
  if (s < 59.95) return `${s.toFixed(1)} s`;
  const whole = Math.round(s);
  return `${Math.floor(whole / 60)} min ${whole % 60} s`;
}

/** An image's details: what was asked, what was made, where it is; copy its URL, download it. */
function ImageDetails({ batch, task }: { batch: Batch; task: Task }) {
  const [copied, setCopied] = useState(false);
  useEffect(() => setCopied(false), [task.id]);
  const url = new URL(task.resultUrls[0], location.href).href;
  const seed = taskSeed(batch.seed, task.index);
  const taken = timeTaken(task);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(url);
      setCopied(true);
    } catch {
      window.prompt('Copy the image URL', url);
    }
  };
  return (
    <div class="image-details" data-testid="image-details">
      <p class="viewer-prompt">{task.prompt}</p>
      <dl class="facts">
        <dt>Seed</dt>
        <dd>{seed === null ? 'drawn from the batch id' : seed}</dd>
        <dt>Size asked</dt>
        <dd>
          {batch.aspectRatio} at {batch.resolution}
        </dd>
        <dt>Size made</dt>
        <dd>{task.width && task.height ? `${task.width} × ${task.height} px` : 'unknown'}</dd>
        <dt>Format</dt>
        <dd>{batch.outputFormat.toUpperCase()}</dd>
        <dt>Model</dt>
        <dd>{batch.model}</dd>
        {taken !== null && (
          <>
            <dt>Time taken</dt>
            <dd data-testid="time-taken">{taken}</dd>
          </>
        )}
      </dl>
      <div class="actions">
        <button type="button" onClick={() => void copy()}>
          {copied ? 'URL copied' : 'Copy URL'}
        </button>
        {/* Through Kiln's own origin: a result URL on a bucket's origin (MinIO) would open, not download. */}
        <a
          class="button"
          href={`/v1/dashboard/batches/${batch.id}/tasks/${task.id}/file`}
          download={`kiln-${batch.id}-${task.index}.${batch.outputFormat === 'jpeg' ? 'jpg' : batch.outputFormat}`}
        >
          Download
        </a>
      </div>
    </div>
  );
}

/** The full-size view: a modal dialog, arrows move between images, Escape closes. */
function Viewer({
  batch,
  tasks,
  index,
  onClose,
  onMove,
}: {
  batch: Batch;
  tasks: Task[];
  index: number | null;
  onClose: () => void;
  onMove: (i: number) => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (index !== null && !d.open) d.showModal();
    if (index === null && d.open) d.close();
  }, [index]);
  const task = index === null ? null : tasks[index];
  const step = (dir: number) => {
    if (index === null) return;
    for (let i = index + dir; i >= 0 && i < tasks.length; i += dir) {
      if (tasks[i].status === 'succeeded' && tasks[i].resultUrls.length) return onMove(i);
    }
  };
  const onKey = (e: KeyboardEvent) => {
    if (e.key === 'ArrowRight') step(1);
    if (e.key === 'ArrowLeft') step(-1);
  };
  return (
    <dialog ref={ref} class="viewer" aria-label="Image" onClose={onClose} onKeyDown={onKey}>
      {task && (
        <>
          <div class="viewer-bar">
            <span>
              #{task.index} · {task.width}×{task.height}
            </span>
            <span class="actions">
              <button type="button" onClick={() => step(-1)} aria-label="Previous image">
                ←
              </button>
              <button type="button" onClick={() => step(1)} aria-label="Next image">
                →
              </button>
              <a class="button" href={task.resultUrls[0]} target="_blank" rel="noopener">
                Original
              </a>
              <button type="button" onClick={onClose}>
                Close
              </button>
            </span>
          </div>
          <div class="viewer-body">
            <img src={task.resultUrls[0]} alt={task.prompt} class="viewer-img" data-testid="viewer-image" />
            <ImageDetails batch={batch} task={task} />
          </div>
        </>
      )}
    </dialog>
  );
}
