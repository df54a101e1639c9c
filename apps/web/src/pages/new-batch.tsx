import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, ApiError, Catalog, describeError, Estimate, Model } from '../api';
import { navigate } from '../router';
import { refreshAccount, useSession } from '../session';
import { ErrorState, formatNumber, Loading, Notice, PageTitle, useLoad } from '../ui';
import { parsePromptsFile } from './prompts-file';

interface Form {
  model: string;
  aspectRatio: string;
  resolution: string;
  countPerCombo: number;
  prompts: string;
  refMode: 'none' | 'each' | 'combined';
  refImages: Array<{ url: string; name: string }>;
  quality: string;
  note: string;
  tier: Tier;
}

type Tier = 'standard' | 'economy';

const promptList = (text: string) => text.split(/\r?\n/).map((p) => p.trim()).filter((p) => p.length > 0);

/** The body of POST /batches (and its estimate) from the form. */
function requestBody(f: Form) {
  return {
    model: f.model,
    prompts: promptList(f.prompts),
    aspectRatio: f.aspectRatio,
    resolution: f.resolution,
    countPerCombo: f.countPerCombo,
    refMode: f.refImages.length ? f.refMode : 'none',
    refImages: f.refImages.length && f.refMode !== 'none' ? f.refImages.map((r) => r.url) : [],
    quality: f.quality,
    note: f.note.trim() || null,
    tier: f.tier,
  };
}

/**
 * The economy price of one image at a resolution, or null: the catalog gives economy prices
 * only for a model whose route runs an upstream batch API (economyCreditCost null otherwise),
 * and only at the resolutions it prices, so the picker offers exactly what create accepts.
 */
function economyCost(m: Model, resolution: string): number | null {
  const cost = m.economyCreditCost?.[resolution];
  return typeof cost === 'number' && m.economyWindowHours !== null ? cost : null;
}

/** Economy falls back to standard when the model or resolution picked no longer offers it (never a tier_not_available). */
function legalTier(m: Model, resolution: string, tier: Tier): Tier {
  return tier === 'economy' && economyCost(m, resolution) !== null ? 'economy' : 'standard';
}

/** A ratio's legal resolutions, else the first legal pair: the pickers never offer an illegal one. */
function legalSize(m: Model, ratio: string, resolution: string): { aspectRatio: string; resolution: string } {
  const ratios = m.aspectRatios;
  const r = ratios.includes(ratio) ? ratio : ratios.includes('1:1') ? '1:1' : ratios[0];
  const resolutions = m.resolutionsByRatio[r] ?? [];
  return { aspectRatio: r, resolution: resolutions.includes(resolution) ? resolution : resolutions[0] };
}

export function NewBatchPage() {
  const catalog = useLoad(() => api<Catalog>('GET', '/models'));
  if (catalog.loading && !catalog.data) return <section><PageTitle>New batch</PageTitle><Loading label="Loading models…" /></section>;
  if (!catalog.data) return <section><PageTitle>New batch</PageTitle><ErrorState error={catalog.error} onRetry={catalog.reload} /></section>;
  if (catalog.data.models.length === 0) return <section><PageTitle>New batch</PageTitle><Notice kind="warn">No model is enabled on this Kiln. An operator must enable one.</Notice></section>;
  return <BatchForm catalog={catalog.data} />;
}

function BatchForm({ catalog }: { catalog: Catalog }) {
  const session = useSession();
  const first = catalog.models[0];
  const [form, setForm] = useState<Form>(() => ({
    model: first.key,
    ...legalSize(first, catalog.defaults.aspectRatio, catalog.defaults.resolution),
    countPerCombo: catalog.defaults.countPerCombo,
    prompts: '',
    refMode: 'each',
    refImages: [],
    quality: catalog.defaults.quality,
    note: '',
    tier: 'standard',
  }));
  const model = catalog.models.find((m) => m.key === form.model) ?? first;
  const body = useMemo(() => requestBody(form), [form]);
  // One key per form content: a double click, or a retry after a lost answer, makes one batch.
  const idempotencyKey = useMemo(() => crypto.randomUUID(), [form]);
  const [estimate, setEstimate] = useState<{ value?: Estimate; error?: unknown }>({});
  const [submitting, setSubmitting] = useState(false);
  const [submitError, setSubmitError] = useState<unknown>(undefined);
  const [fileError, setFileError] = useState<string | null>(null);
  const [uploading, setUploading] = useState(false);
  const [dragging, setDragging] = useState(false);
  const submittingRef = useRef(false);

  // Every change keeps the tier legal for the model and resolution it leaves the form with.
  const set = (patch: Partial<Form>) =>
    setForm((f) => {
      const next = { ...f, ...patch };
      const m = catalog.models.find((x) => x.key === next.model) ?? first;
      return { ...next, tier: legalTier(m, next.resolution, next.tier) };
    });
  const pickModel = (key: string) => {
    const m = catalog.models.find((x) => x.key === key)!;
    set({ model: key, ...legalSize(m, form.aspectRatio, form.resolution) });
  };

  // The live estimate: the api prices the form as it would create it (debounced).
  useEffect(() => {
    if (body.prompts.length === 0) return setEstimate({});
    const stop = new AbortController();
    const timer = setTimeout(() => {
      api<Estimate>('POST', '/batches/estimate', { body, signal: stop.signal }).then(
        (value) => setEstimate({ value }),
        (error) => !stop.signal.aborted && setEstimate({ error }),
      );
    }, 300);
    return () => {
      clearTimeout(timer);
      stop.abort();
    };
  }, [body]);

  const readPromptFiles = async (files: FileList | null) => {
    setFileError(null);
    if (!files) return;
    try {
      const added: string[] = [];
      for (const file of Array.from(files)) {
        if (!/\.(txt|jsonl)$/i.test(file.name)) throw new Error(`${file.name}: only .txt and .jsonl files hold prompts`);
        added.push(...parsePromptsFile(file.name, await file.text()));
      }
      set({ prompts: [...promptList(form.prompts), ...added].join('\n') });
    } catch (err) {
      setFileError((err as Error).message);
    }
  };

  const upload = async (files: FileList | null) => {
    if (!files || files.length === 0) return;
    setFileError(null);
    setUploading(true);
    try {
      const data = new FormData();
      for (const f of Array.from(files)) data.append('file', f, f.name);
      const res = await api<{ files: Array<{ url: string; name: string }> }>('POST', '/uploads', { body: data, timeoutMs: 120_000 });
      set({ refImages: [...form.refImages, ...res.files] });
    } catch (err) {
      setFileError(describeError(err));
    } finally {
      setUploading(false);
    }
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    if (submittingRef.current) return;
    submittingRef.current = true;
    setSubmitting(true);
    setSubmitError(undefined);
    try {
      const created = await api<{ id: string }>('POST', '/batches', { body, headers: { 'Idempotency-Key': idempotencyKey } });
      void refreshAccount();
      navigate(`/batches/${created.id}`);
    } catch (err) {
      setSubmitError(err);
    } finally {
      submittingRef.current = false;
      setSubmitting(false);
    }
  };

  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    setDragging(false);
    const files = e.dataTransfer?.files ?? null;
    if (!files) return;
    const images = Array.from(files).some((f) => f.type.startsWith('image/'));
    void (images ? upload(files) : readPromptFiles(files));
  };

  const count = body.prompts.length;
  const maxRefs = model.maxRefImages ?? catalog.limits.maxRefImages;
  const balance = session.kind === 'signed-in' ? session.info.account.balance : null;

  return (
    <section>
      <PageTitle>New batch</PageTitle>
      {balance === 0 && (
        <Notice kind="warn">
          <strong>No credits.</strong> You can price a batch here; creating it needs credits, which an operator grants.
        </Notice>
      )}
      <form class="new-batch" onSubmit={submit}>
        <div class="card">
          <label for="model">Model</label>
          <select id="model" value={form.model} onChange={(e) => pickModel(e.currentTarget.value)}>
            {catalog.models.map((m) => (
              <option key={m.key} value={m.key}>
                {m.displayName} — {priceRange(m)}
                {m.economyCreditCost ? ` (economy from ${Math.min(...Object.values(m.economyCreditCost))})` : ''}
              </option>
            ))}
          </select>
          <p class="help">{model.blurb}</p>
          <div class="row">
            <div class="field">
              <label for="ratio">Aspect ratio</label>
              <select id="ratio" value={form.aspectRatio} onChange={(e) => set(legalSize(model, e.currentTarget.value, form.resolution))}>
                {model.aspectRatios.map((r) => (
                  <option key={r} value={r}>
                    {r}
                  </option>
                ))}
              </select>
            </div>
            <div class="field">
              <label for="resolution">Resolution</label>
              <select id="resolution" value={form.resolution} onChange={(e) => set({ resolution: e.currentTarget.value })}>
                {(model.resolutionsByRatio[form.aspectRatio] ?? []).map((r) => (
                  <option key={r} value={r}>
                    {r} — {model.creditCost[r]} credit{model.creditCost[r] === 1 ? '' : 's'} per image
                  </option>
                ))}
              </select>
            </div>
            <div class="field">
              <label for="count">Images per prompt</label>
              <input
                id="count"
                type="number"
                min={catalog.limits.countPerCombo.min}
                max={catalog.limits.countPerCombo.max}
                value={form.countPerCombo}
                onInput={(e) => set({ countPerCombo: Math.max(1, Math.floor(Number(e.currentTarget.value) || 1)) })}
              />
            </div>
            {model.supportsQuality && (
              <div class="field">
                <label for="quality">Quality</label>
                <select id="quality" value={form.quality} onChange={(e) => set({ quality: e.currentTarget.value })}>
                  {['auto', 'low', 'medium', 'high'].map((q) => (
                    <option key={q} value={q}>
                      {q}
                    </option>
                  ))}
                </select>
              </div>
            )}
          </div>
          {model.economyCreditCost && (
            <TierPicker model={model} resolution={form.resolution} tier={form.tier} onPick={(tier) => set({ tier })} />
          )}
        </div>

        <div
          class={`card drop${dragging ? ' dragging' : ''}`}
          onDragOver={(e) => {
            e.preventDefault();
            setDragging(true);
          }}
          onDragLeave={() => setDragging(false)}
          onDrop={onDrop}
        >
          <label for="prompts">Prompts, one per line</label>
          <textarea
            id="prompts"
            rows={6}
            value={form.prompts}
            onInput={(e) => set({ prompts: e.currentTarget.value })}
            aria-describedby="prompts-help"
            placeholder={"a red fox in the snow\na lighthouse at dusk"}
          />
          <p id="prompts-help" class="help">
            {formatNumber(count)} of at most {formatNumber(catalog.limits.maxPrompts)} prompts. Drop .txt or .jsonl files here, or{' '}
            <label class="file-label">
              choose a file
              <input type="file" accept=".txt,.jsonl" multiple class="sr-only" onChange={(e) => void readPromptFiles(e.currentTarget.files)} />
            </label>
            .
          </p>
        </div>

        {model.supportsRefImages && (
          <div class="card">
            <p class="label">Reference images (optional)</p>
            <p class="help">
              Up to {maxRefs} for this model; PNG, JPEG, WebP or GIF up to {Math.round(catalog.limits.upload.maxBytes / 1048576)} MB each. Drop them
              above or{' '}
              <label class="file-label">
                upload files
                <input type="file" accept={catalog.limits.upload.types.join(',')} multiple class="sr-only" onChange={(e) => void upload(e.currentTarget.files)} />
              </label>
              .
            </p>
            {uploading && <Loading label="Uploading…" />}
            {form.refImages.length > 0 && (
              <>
                <ul class="refs">
                  {form.refImages.map((r) => (
                    <li key={r.url}>
                      <img src={r.url} alt={r.name} width={64} height={64} />
                      <button type="button" class="small" onClick={() => set({ refImages: form.refImages.filter((x) => x.url !== r.url) })} aria-label={`Remove ${r.name}`}>
                        Remove
                      </button>
                    </li>
                  ))}
                </ul>
                <fieldset>
                  <legend>Use the references</legend>
                  <label class="check">
                    <input type="radio" name="refMode" checked={form.refMode === 'each'} onChange={() => set({ refMode: 'each' })} />
                    each with every prompt (multiplies the images)
                  </label>
                  <label class="check">
                    <input type="radio" name="refMode" checked={form.refMode === 'combined'} onChange={() => set({ refMode: 'combined' })} />
                    all together in every image
                  </label>
                </fieldset>
              </>
            )}
          </div>
        )}
        {fileError && (
          <p class="notice notice-error" role="alert">
            {fileError}
          </p>
        )}

        <div class="card">
          <label for="note">Note (optional)</label>
          <input id="note" maxLength={1000} value={form.note} onInput={(e) => set({ note: e.currentTarget.value })} placeholder="Shown with the batch" />
        </div>

        <div class="card estimate" aria-live="polite" data-testid="estimate">
          <EstimateView estimate={estimate} hasPrompts={count > 0} windowHours={model.economyWindowHours} />
        </div>
        {submitError !== undefined && <ErrorState error={submitError} />}
        <button type="submit" class="primary wide" disabled={submitting || count === 0 || uploading}>
          {submitting ? 'Creating…' : 'Create batch'}
        </button>
      </form>
    </section>
  );
}

function priceRange(m: Model): string {
  const prices = Object.values(m.creditCost);
  const low = Math.min(...prices);
  const high = Math.max(...prices);
  return low === high ? `${low} credit${low === 1 ? '' : 's'} per image` : `${low} to ${high} credits per image`;
}

/**
 * Standard or economy, each with its price at the chosen resolution; shown only for models
 * with an economy tier. Economy at a resolution it does not price is disabled and says so.
 */
function TierPicker({ model, resolution, tier, onPick }: { model: Model; resolution: string; tier: Tier; onPick: (tier: Tier) => void }) {
  const standard = model.creditCost[resolution];
  const economy = economyCost(model, resolution);
  const credits = (n: number) => `${n} credit${n === 1 ? '' : 's'} per image`;
  const offered = Object.keys(model.economyCreditCost ?? {}).join(', ');
  return (
    <fieldset class="tier">
      <legend>Tier</legend>
      <label class="check">
        <input type="radio" name="tier" value="standard" checked={tier === 'standard'} onChange={() => onPick('standard')} />
        Standard — {credits(standard)}, rendered right away
      </label>
      <label class="check">
        <input type="radio" name="tier" value="economy" checked={tier === 'economy'} disabled={economy === null} onChange={() => onPick('economy')} />
        {economy === null
          ? `Economy — not at ${resolution} (only ${offered})`
          : `Economy — ${credits(economy)}, ready within ${model.economyWindowHours} hours`}
      </label>
    </fieldset>
  );
}

function EstimateView({ estimate, hasPrompts, windowHours }: { estimate: { value?: Estimate; error?: unknown }; hasPrompts: boolean; windowHours: number | null }) {
  if (!hasPrompts) return <p>Type or drop prompts to see the price.</p>;
  if (estimate.error) {
    return <p class="error-text">{estimate.error instanceof ApiError ? estimate.error.message : describeError(estimate.error)}</p>;
  }
  const e = estimate.value;
  if (!e) return <p>Pricing…</p>;
  return (
    <>
      <p class="estimate-line">
        <strong>{formatNumber(e.total)}</strong> image{e.total === 1 ? '' : 's'} × {e.creditCost} = <strong>{formatNumber(e.creditsRequired)} credits</strong>{' '}
        <span class="muted">(balance {formatNumber(e.balance)})</span>
      </p>
      {e.tier === 'economy' && <p class="help">Economy tier: every image ready within {windowHours} hours; any not done by then is refunded.</p>}
      {e.refusal && <p class="error-text">{e.refusal.message}</p>}
    </>
  );
}
