import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, ApiError, Catalog, describeError, Estimate, Model } from '../api';
import { Link, navigate } from '../router';
import { refreshAccount, useSession } from '../session';
import { ErrorState, formatNumber, Loading, Notice, PageTitle, useLoad } from '../ui';
import { FilePrompt, parsePromptsFile, promptsByTier, Tier } from './prompts-file';

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
  /** The picker's tier: every prompt's, but those whose .jsonl line chose their own. */
  tier: Tier;
  /**
   * Set when a .jsonl file's lines chose tiers: then these are the prompts (the textarea shows
   * them, read-only), each on its line's tier or the picker's. Null: the textarea's prompts.
   */
  filePrompts: FilePrompt[] | null;
}

const promptList = (text: string) => text.split(/\r?\n/).map((p) => p.trim()).filter((p) => p.length > 0);

/**
 * The bodies of POST /batches (and their estimates) from the form: one, or, when a file's lines
 * chose tiers, one per tier its prompts end up on.
 */
function requestBodies(f: Form) {
  const base = {
    model: f.model,
    aspectRatio: f.aspectRatio,
    resolution: f.resolution,
    countPerCombo: f.countPerCombo,
    refMode: f.refImages.length ? f.refMode : 'none',
    refImages: f.refImages.length && f.refMode !== 'none' ? f.refImages.map((r) => r.url) : [],
    quality: f.quality,
    note: f.note.trim() || null,
  };
  if (!f.filePrompts) return [{ ...base, prompts: promptList(f.prompts), tier: f.tier }];
  return promptsByTier(f.filePrompts, f.tier).map(({ tier, prompts }) => ({ ...base, prompts, tier }));
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
    filePrompts: null,
  }));
  const model = catalog.models.find((m) => m.key === form.model) ?? first;
  const bodies = useMemo(() => requestBodies(form), [form]);
  // One key per form content: a double click, or a retry after a lost answer, makes one batch.
  const idempotencyKey = useMemo(() => crypto.randomUUID(), [form]);
  const [estimate, setEstimate] = useState<{ value?: Estimate[]; error?: unknown }>({});
  const [submitting, setSubmitting] = useState(false);
  const [submitError, setSubmitError] = useState<unknown>(undefined);
  // The batches a submit of a file mixing tiers created before one was refused.
  const [created, setCreated] = useState<Array<{ id: string; tier: Tier }>>([]);
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

  // The live estimate: the api prices the form as it would create it (debounced), a batch per tier.
  useEffect(() => {
    if (bodies.every((b) => b.prompts.length === 0)) return setEstimate({});
    const stop = new AbortController();
    const timer = setTimeout(() => {
      Promise.all(bodies.map((body) => api<Estimate>('POST', '/batches/estimate', { body, signal: stop.signal }))).then(
        (value) => setEstimate({ value }),
        (error) => !stop.signal.aborted && setEstimate({ error }),
      );
    }, 300);
    return () => {
      clearTimeout(timer);
      stop.abort();
    };
  }, [bodies]);

  const readPromptFiles = async (files: FileList | null) => {
    setFileError(null);
    if (!files) return;
    try {
      const added: FilePrompt[] = [];
      for (const file of Array.from(files)) {
        if (!/\.(txt|jsonl)$/i.test(file.name)) throw new Error(`${file.name}: only .txt and .jsonl files hold prompts`);
        added.push(...parsePromptsFile(file.name, await file.text()));
      }
      const all: FilePrompt[] = [...(form.filePrompts ?? promptList(form.prompts).map((prompt) => ({ prompt }))), ...added];
      // Once a line chose a tier, the prompts are held with their tiers (the textarea turns
      // read-only: an edited line could no longer say which tier it had).
      set({ prompts: all.map((p) => p.prompt).join('\n'), filePrompts: all.some((p) => p.tier) ? all : null });
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
    const made: Array<{ id: string; tier: Tier }> = [];
    try {
      if (bodies.length > 1) await priceTogether(bodies);
      for (const body of bodies) {
        // A key per tier's batch: creating again after the second was refused replays the first.
        const key = bodies.length > 1 ? `${idempotencyKey}-${body.tier}` : idempotencyKey;
        const batch = await api<{ id: string }>('POST', '/batches', { body, headers: { 'Idempotency-Key': key } });
        made.push({ id: batch.id, tier: body.tier });
      }
      void refreshAccount();
      navigate(made.length === 1 ? `/batches/${made[0].id}` : '/batches');
    } catch (err) {
      if (made.length) void refreshAccount();
      setCreated(made);
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

  const count = bodies.reduce((n, b) => n + b.prompts.length, 0);
  // Only a file's lines can ask for economy where the model has none (the picker falls back to standard).
  const economyMissing = bodies.some((b) => b.tier === 'economy') && economyCost(model, form.resolution) === null;
  const pickerPrompts = form.filePrompts ? form.filePrompts.filter((p) => !p.tier).length : count;
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
            <TierPicker
              model={model}
              resolution={form.resolution}
              tier={form.tier}
              onPick={(tier) => set({ tier })}
              fileTiers={form.filePrompts ? (pickerPrompts === 0 ? 'all' : 'some') : 'none'}
            />
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
            readOnly={form.filePrompts !== null}
            onInput={(e) => set({ prompts: e.currentTarget.value })}
            aria-describedby={form.filePrompts ? 'prompts-help file-tiers' : 'prompts-help'}
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
          {form.filePrompts && (
            <FileTiers
              bodies={bodies}
              pickerPrompts={pickerPrompts}
              economyMissing={economyMissing ? `${model.displayName} has no economy tier${model.economyCreditCost ? ` at ${form.resolution}` : ''}` : null}
              onClear={() => set({ filePrompts: null })}
            />
          )}
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
        {submitError !== undefined && created.length > 0 && (
          <Notice kind="warn">
            <Link to={`/batches/${created[0].id}`}>The {created[0].tier} batch</Link> was created, the other was not (below). Creating again makes only the
            missing one.
          </Notice>
        )}
        {submitError !== undefined && <ErrorState error={submitError} />}
        <button type="submit" class="primary wide" disabled={submitting || count === 0 || uploading || economyMissing}>
          {submitting ? 'Creating…' : bodies.length > 1 ? `Create ${bodies.length} batches` : 'Create batch'}
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
 * A file mixing tiers makes a batch per tier. As the CLI does, they are priced together before
 * either is created: a refusal of one (a plan without economy batches, a batch over the limit)
 * or a balance short of both creates neither. Throws what stops them.
 */
async function priceTogether(bodies: ReturnType<typeof requestBodies>): Promise<void> {
  const estimates = await Promise.all(bodies.map((body) => api<Estimate>('POST', '/batches/estimate', { body })));
  const refusal = estimates.find((e) => e.refusal)?.refusal;
  if (refusal) throw new ApiError(400, refusal.code, `${refusal.message} (nothing was created)`, refusal.details);
  const needed = estimates.reduce((sum, e) => sum + e.creditsRequired, 0);
  const { balance } = estimates[0];
  if (needed > balance) {
    throw new ApiError(402, 'insufficient_credits', `The ${bodies.length} batches cost ${needed} credits; the balance is ${balance} (nothing was created)`, {
      creditsRequired: needed,
      balance,
      batches: bodies.length,
    });
  }
}

/** What a file's tiers do: the prompts per tier (a batch each), and the way back to one tier for all. */
function FileTiers({
  bodies,
  pickerPrompts,
  economyMissing,
  onClear,
}: {
  bodies: ReturnType<typeof requestBodies>;
  pickerPrompts: number;
  economyMissing: string | null;
  onClear: () => void;
}) {
  const counts = bodies.map((b) => `${formatNumber(b.prompts.length)} ${b.tier}`).join(', ');
  return (
    <div id="file-tiers" data-testid="file-tiers">
      <p class="help">
        The file's lines choose their tier{pickerPrompts > 0 ? ` (${formatNumber(pickerPrompts)} without one take${pickerPrompts === 1 ? 's' : ''} the picker's)` : ''}: {counts}
        {bodies.length > 1 ? ', a batch per tier.' : '.'}{' '}
        <button type="button" class="small" onClick={onClear}>
          Use one tier for all
        </button>
      </p>
      {economyMissing && (
        <p class="error-text" role="alert">
          {economyMissing}: pick a model and resolution with economy prices, or use one tier for all.
        </p>
      )}
    </div>
  );
}

/**
 * Standard or economy, each with its price at the chosen resolution; shown only for models
 * with an economy tier. Economy at a resolution it does not price is disabled and says so.
 * When a file's lines chose tiers, the picker is only for the prompts whose line set none
 * (disabled when there are none).
 */
function TierPicker({
  model,
  resolution,
  tier,
  onPick,
  fileTiers,
}: {
  model: Model;
  resolution: string;
  tier: Tier;
  onPick: (tier: Tier) => void;
  fileTiers: 'none' | 'some' | 'all';
}) {
  const standard = model.creditCost[resolution];
  const economy = economyCost(model, resolution);
  const credits = (n: number) => `${n} credit${n === 1 ? '' : 's'} per image`;
  const offered = Object.keys(model.economyCreditCost ?? {}).join(', ');
  return (
    <fieldset class="tier" disabled={fileTiers === 'all'}>
      <legend>Tier</legend>
      {fileTiers !== 'none' && (
        <p class="help">
          {fileTiers === 'all' ? "Every prompt's file line chose its tier." : 'For the prompts whose file line chose no tier.'}
        </p>
      )}
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

function EstimateView({ estimate, hasPrompts, windowHours }: { estimate: { value?: Estimate[]; error?: unknown }; hasPrompts: boolean; windowHours: number | null }) {
  if (!hasPrompts) return <p>Type or drop prompts to see the price.</p>;
  if (estimate.error) {
    return <p class="error-text">{estimate.error instanceof ApiError ? estimate.error.message : describeError(estimate.error)}</p>;
  }
  const all = estimate.value;
  if (!all) return <p>Pricing…</p>;
  const mixed = all.length > 1;
  const needed = all.reduce((sum, e) => sum + e.creditsRequired, 0);
  const { balance } = all[0];
  return (
    <>
      {all.map((e) => (
        <p class="estimate-line" key={e.tier}>
          {mixed && `${e.tier === 'economy' ? 'Economy' : 'Standard'}: `}
          <strong>{formatNumber(e.total)}</strong> image{e.total === 1 ? '' : 's'} × {e.creditCost} = <strong>{formatNumber(e.creditsRequired)} credits</strong>
          {!mixed && (
            <>
              {' '}
              <span class="muted">(balance {formatNumber(balance)})</span>
            </>
          )}
        </p>
      ))}
      {mixed && (
        <p class="estimate-line">
          Both batches: <strong>{formatNumber(needed)} credits</strong> <span class="muted">(balance {formatNumber(balance)})</span>
        </p>
      )}
      {all.some((e) => e.tier === 'economy') && (
        <p class="help">
          {mixed ? 'Economy batch' : 'Economy tier'}: every image ready within {windowHours} hours; any not done by then is refunded.
        </p>
      )}
      {all.map((e) => e.refusal && <p class="error-text" key={`${e.tier}-refusal`}>{e.refusal.message}</p>)}
      {mixed && needed > balance && !all.some((e) => e.refusal) && (
        <p class="error-text">
          Both batches need {formatNumber(needed)} credits; the balance is {formatNumber(balance)}.
        </p>
      )}
    </>
  );
}
