import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { describeError } from './api';

export const formatNumber = (n: number) => n.toLocaleString('en-US');
export const formatDate = (ms: number | null) =>
  ms === null ? '—' : new Date(ms).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'short' });

/** Each page's heading takes focus when the page opens, so a screen reader announces it. */
export function PageTitle({ children }: { children: ComponentChildren }) {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    ref.current?.focus({ preventScroll: true });
    document.title = `${ref.current?.textContent ?? ''} · Kiln`;
  }, []);
  return (
    <h1 tabIndex={-1} ref={ref}>
      {children}
    </h1>
  );
}

export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <p class="loading" role="status" aria-live="polite">
      <span class="spinner" aria-hidden="true" />
      {label}
    </p>
  );
}

/** A failure with what to do: retry, or (503) wait and retry. */
export function ErrorState({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  return (
    <div class="notice notice-error" role="alert">
      <p>{describeError(error)}</p>
      {onRetry && (
        <button type="button" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Notice({ kind = 'info', children }: { kind?: 'info' | 'warn' | 'success'; children: ComponentChildren }) {
  return <div class={`notice notice-${kind}`}>{children}</div>;
}

export function Empty({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty">
      <p class="empty-title">{title}</p>
      {children}
    </div>
  );
}

/** Loads data on mount and when `deps` change; `reload` re-runs it. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []) {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ data: s.data, loading: true }));
    load().then(
      (data) => live && setState({ data, loading: false }),
      (error) => live && setState({ error, loading: false }),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  return { ...state, reload: () => setTick((t) => t + 1), setData: (data: T) => setState({ data, loading: false }) };
}

/** A confirmation in a modal <dialog>: focus stays inside, Escape cancels. */
export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  children: ComponentChildren;
  confirmLabel: string;
  danger?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog ref={ref} class="dialog" aria-labelledby="confirm-title" onClose={props.onCancel}>
      <h2 id="confirm-title">{props.title}</h2>
      <div>{props.children}</div>
      <div class="actions">
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
        <button type="button" class={props.danger ? 'danger' : 'primary'} onClick={props.onConfirm}>
          {props.confirmLabel}
        </button>
      </div>
    </dialog>
  );
}

/** A secret shown once: read-only field, a copy button, and the warning that it will not come back. */
export function SecretOnce({ label, secret, onDone }: { label: string; secret: string; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret);
      setCopied(true);
    } catch {
      input.current?.select();
    }
  };
  return (
    <div class="notice notice-success secret" role="region" aria-label={label}>
      <p>
        <strong>{label}.</strong> Copy it now: Kiln shows it only this once and keeps only a hash.
      </p>
      <div class="secret-row">
        <input
          ref={input}
          readOnly
          value={secret}
          aria-label={label}
          class="mono"
          data-testid="secret"
          onFocus={(e) => e.currentTarget.select()}
        />
        <button type="button" onClick={() => void copy()}>
          {copied ? 'Copied' : 'Copy'}
        </button>
      </div>
      <button type="button" class="link" onClick={onDone}>
        I stored it, hide it
      </button>
    </div>
  );
}

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge badge-${status}`}>{status.replace(/_/g, ' ')}</span>;
}

/** A fieldset of checkboxes over `options`; the chosen ones stay in the options' order. */
export function CheckboxGroup({
  legend,
  options,
  chosen,
  onChange,
}: {
  legend: string;
  options: string[];
  chosen: string[];
  onChange: (chosen: string[]) => void;
}) {
  return (
    <fieldset>
      <legend>{legend}</legend>
      <div class="checks">
        {options.map((o) => (
          <label key={o} class="check">
            <input
              type="checkbox"
              checked={chosen.includes(o)}
              onChange={(e) =>
                onChange(e.currentTarget.checked ? options.filter((x) => x === o || chosen.includes(x)) : chosen.filter((x) => x !== o))
              }
            />
            <span class="mono">{o}</span>
          </label>
        ))}
      </div>
    </fieldset>
  );
}

/** A row of a FiguresTable: its name (the row's header) and its figures, in column order. */
export interface FiguresRow {
  key: string;
  label: string;
  figures: number[];
}

/**
 * A captioned table of named rows of figures (usage per key and model, a file's batch plan):
 * the first column names each row, the rest are numbers, right-aligned; it scrolls sideways in
 * its own box on a narrow screen rather than the page.
 */
export function FiguresTable({
  caption,
  columns,
  rows,
  class: className,
  testId,
}: {
  caption: string;
  /** The first names the rows' column, the others the figures'. */
  columns: string[];
  rows: FiguresRow[];
  class: string;
  testId?: string;
}) {
  return (
    <div class="table-wrap">
      <table class={`figures ${className}`} data-testid={testId}>
        <caption>{caption}</caption>
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c} scope="col">
                {c}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.key}>
              <th scope="row">{r.label}</th>
              {r.figures.map((n, i) => (
                <td key={i}>{formatNumber(n)}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
