import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { AccountInfo, api, ApiError, Catalog, describeError, Estimate, Model } from '../api';
import { Link, navigate } from '../router';
import { refreshAccount, useSession } from '../session';
import { ErrorState, FiguresTable, formatNumber, Loading, Notice, PageTitle, useLoad } from '../ui';
import { howToGetCredits } from './overview';
import {
  BatchBody,
  BatchLimits,
  BatchPlan,
  linesCarryOptions,
  parsePromptsFile,
  planBatches,
  PromptLine,
  Tier,
  typedLines,
} from './prompts-file';

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
  /** Minutes from the submit after which images not started are cancelled and refunded; '' for none. */
  deadlineMinutes: string;
  /** The picker's tier: every prompt's, but those whose .jsonl line chose their own. */
  tier: Tier;
  /**
   * Set when a .jsonl file's lines set options of their own (tier, model, size, count, seed,
   * note): then these are the prompts (the textarea shows them, read-only), each line's options
   * over the pickers'. Null: the textarea's prompts, every one on the pickers'.
   */
  fileLines: PromptLine[] | null;
}

/**
 * The batches the form creates, as `kiln submit` would for the same prompts and options
 * (prompts-file.ts): a batch per distinct set of settings, each split by the plan's limit.
 */
function batchPlan(f: Form, limits: BatchLimits): BatchPlan {
  const pickers = {
    model: f.model,
    aspectRatio: f.aspectRatio,
    resolution: f.resolution,
    countPerCombo: f.countPerCombo,
    note: f.note.trim(),
    tier: f.tier,
    refMode: f.refImages.length ? f.refMode : ('none' as const),
    refImages: f.refImages.map((r) => r.url),
    quality: f.quality,
  };
  return planBatches(f.fileLines ?? typedLines(f.prompts), pickers, limits);
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
  if (catalog.loading && !catalog.data)
    return (
      <section>
        <PageTitle>New batch</PageTitle>
        <Loading label="Loading models…" />
      </section>
    );
  if (!catalog.data)
    return (
      <section>
        <PageTitle>New batch</PageTitle>
        <ErrorState error={catalog.error} onRetry={catalog.reload} />
      </section>
    );
  if (catalog.data.models.length === 0)
    return (
      <section>
        <PageTitle>New batch</PageTitle>
        <Notice kind="warn">No model is enabled on this Kiln. An operator must enable one.</Notice>
      </section>
    );
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
    deadlineMinutes: '',
    tier: 'standard',
    fileLines: null,
  }));
  const model = catalog.models.find((m) => m.key === form.model) ?? first;
  const limits: BatchLimits = {
    maxImagesPerBatch: session.kind === 'signed-in' ? session.info.limits.maxImagesPerBatch : Number.MAX_SAFE_INTEGER,
    maxPrompts: catalog.limits.maxPrompts,
  };
  const plan = useMemo(() => batchPlan(form, limits), [form, limits.maxImagesPerBatch, limits.maxPrompts]);
  const bodies = plan.batches.map((b) => b.body);
  // One key per form content: a double click, or a retry after a lost answer, makes one batch.
  const idempotencyKey = useMemo(() => crypto.randomUUID(), [form, limits.maxImagesPerBatch]);
  const [estimate, setEstimate] = useState<{ value?: Estimate[]; error?: unknown }>({});
  const [submitting, setSubmitting] = useState(false);
  const [submitError, setSubmitError] = useState<unknown>(undefined);
  // The batches a submit of several created before one was refused.
  const [created, setCreated] = useState<string[]>([]);
  const [fileError, setFileError] = useState<string | null>(null);
  const [uploading, setUploading] = useState(false);
  const [dragging, setDragging] = useState(false);
  const submittingRef = useRef(false);
  // The deadline is fixed at the first submit of a form (its idempotency key): a submit again
  // after a refusal must send the very same bodies, or the batches made would not replay.
  const deadlineRef = useRef<{ key: string; at: number } | null>(null);

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

  // The live estimate: the api prices the form as it would create it (debounced), batch by batch.
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
  }, [plan]);

  const readPromptFiles = async (files: FileList | null) => {
    setFileError(null);
    if (!files) return;
    try {
      const added: PromptLine[] = [];
      // The CLI's parser (libs/prompts-file): its checks and its messages, naming the file and line.
      for (const file of Array.from(files)) added.push(...parsePromptsFile(file.name, await file.text()));
      const all = [...(form.fileLines ?? typedLines(form.prompts)), ...added];
      const text = all.map((p) => p.prompt).join('\n');
      // Once a line set options of its own (or holds a prompt the textarea would change: a line
      // break, spaces at an end), the lines are held as read (the textarea turns read-only: an
      // edited line could no longer say what it had set).
      const asTyped = typedLines(text);
      const same = asTyped.length === all.length && asTyped.every((l, i) => l.prompt === all[i].prompt);
      set({ prompts: text, fileLines: linesCarryOptions(all) || !same ? all : null });
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
    const made: string[] = [];
    try {
      if (bodies.length > 1) await priceTogether(bodies);
      const minutes = Number(form.deadlineMinutes);
      if (form.deadlineMinutes.trim() && deadlineRef.current?.key !== idempotencyKey) {
        deadlineRef.current = { key: idempotencyKey, at: Date.now() + Math.round(minutes * 60_000) };
      }
      const deadline = form.deadlineMinutes.trim() ? deadlineRef.current?.at : undefined;
      for (const batch of plan.batches) {
        // A key per batch, by its place in the form as the CLI keys a file's: creating again
        // after one was refused replays those already made.
        const key = plan.batches.length > 1 ? `${idempotencyKey}-${batch.place}` : idempotencyKey;
        const res = await api<{ id: string }>('POST', '/batches', {
          body: deadline === undefined ? batch.body : { ...batch.body, deadline },
          headers: { 'Idempotency-Key': key },
        });
        made.push(res.id);
      }
      void refreshAccount();
      navigate(made.length === 1 ? `/batches/${made[0]}` : '/batches');
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
  // Only a file's lines can ask for economy where the model has none (the picker falls back to
  // standard). A model the catalog does not know is the estimate's to refuse.
  const modelOf = (key: string) => catalog.models.find((m) => m.key === key);
  const economyMissing = bodies
    .filter((b) => b.tier === 'economy')
    .map((b) => ({ m: modelOf(b.model), resolution: b.resolution }))
    .find(({ m, resolution }) => m && economyCost(m, resolution) === null);
  const tiered = form.fileLines ? form.fileLines.filter((l) => l.options.tier).length : 0;
  const economyWindow = Math.max(0, ...bodies.filter((b) => b.tier === 'economy').map((b) => modelOf(b.model)?.economyWindowHours ?? 0));
  const maxRefs = model.maxRefImages ?? catalog.limits.maxRefImages;
  const info = session.kind === 'signed-in' ? session.info : null;

  return (
    <section>
      <PageTitle>New batch</PageTitle>
      {info && info.account.balance <= 0 && (
        <Notice kind="warn">
          <strong>No credits.</strong> You can price a batch here. {howToGetCredits(info.purchasesEnabled, info.account.email)}
        </Notice>
      )}
      <form class="new-batch" onSubmit={(e) => void submit(e)}>
        <div class="card">
          <label for="model">Model</label>
          <select id="model" value={form.model} onChange={(e) => pickModel(e.currentTarget.value)}>
            {catalog.models.map((m) => (
              <option key={m.key} value={m.key}>
                {m.displayName} — {priceRange(m, true)}
              </option>
            ))}
          </select>
          {/* A select cuts a long label on a phone: the option says the price, the line below the rest. */}
          <p class="help">
            {priceRange(model)}
            {model.economyCreditCost ? ` (economy from ${Math.min(...Object.values(model.economyCreditCost))})` : ''}. {model.blurb}
          </p>
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
            <div class="field select-wide">
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
              fileTiers={tiered === 0 ? 'none' : tiered === count ? 'all' : 'some'}
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
            readOnly={form.fileLines !== null}
            onInput={(e) => set({ prompts: e.currentTarget.value })}
            aria-describedby={form.fileLines ? 'prompts-help file-settings' : 'prompts-help'}
            placeholder={'a red fox in the snow\na lighthouse at dusk'}
          />
          <p id="prompts-help" class="help">
            {formatNumber(count)} prompt{count === 1 ? '' : 's'}
            {limits.maxImagesPerBatch < Number.MAX_SAFE_INTEGER &&
              `; your plan's batches hold up to ${formatNumber(limits.maxImagesPerBatch)} images each, more make more batches`}
            . Drop .txt or .jsonl files here (as <code>kiln submit</code> reads them), or{' '}
            <label class="file-label">
              choose a file
              <input
                type="file"
                accept=".txt,.jsonl"
                multiple
                class="sr-only"
                onChange={(e) => void readPromptFiles(e.currentTarget.files)}
              />
            </label>
            .
          </p>
          {form.fileLines && (
            <FileSettings
              lines={form.fileLines}
              economyMissing={
                economyMissing?.m
                  ? `${economyMissing.m.displayName} has no economy tier${economyMissing.m.economyCreditCost ? ` at ${economyMissing.resolution}` : ''}`
                  : null
              }
              onClear={() => set({ fileLines: null })}
            />
          )}
        </div>

        {model.supportsRefImages && (
          <div class="card">
            <p class="label">Reference images (optional)</p>
            <p class="help">
              Up to {maxRefs} for this model; PNG, JPEG, WebP or GIF up to {Math.round(catalog.limits.upload.maxBytes / 1048576)} MB each.
              Drop them above or{' '}
              <label class="file-label">
                upload files
                <input
                  type="file"
                  accept={catalog.limits.upload.types.join(',')}
                  multiple
                  class="sr-only"
                  onChange={(e) => void upload(e.currentTarget.files)}
                />
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
                      <button
                        type="button"
                        class="small"
                        onClick={() => set({ refImages: form.refImages.filter((x) => x.url !== r.url) })}
                        aria-label={`Remove ${r.name}`}
                      >
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
                    <input
                      type="radio"
                      name="refMode"
                      checked={form.refMode === 'combined'}
                      onChange={() => set({ refMode: 'combined' })}
                    />
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
          <input
            id="note"
            maxLength={1000}
            value={form.note}
            onInput={(e) => set({ note: e.currentTarget.value })}
            placeholder="Shown with the batch"
          />
          <label for="deadline">Deadline in minutes (optional)</label>
          <input
            id="deadline"
            type="number"
            min={1}
            max={10080}
            step={1}
            value={form.deadlineMinutes}
            onInput={(e) => set({ deadlineMinutes: e.currentTarget.value })}
            placeholder="e.g. 60"
            aria-describedby="deadline-help"
          />
          {/* In text, not the placeholder: a phone's field cuts a long placeholder, and it goes once typed in. */}
          <p class="help" id="deadline-help">
            Images not started by then are cancelled and refunded.
          </p>
        </div>

        <div class="card estimate" aria-live="polite" data-testid="estimate">
          <EstimateView
            estimate={estimate}
            plan={plan}
            hasPrompts={count > 0}
            windowHours={economyWindow}
            modelName={(key) => modelOf(key)?.displayName ?? key}
          />
        </div>
        {submitError !== undefined && created.length > 0 && (
          <Notice kind="warn">
            {created.length} of {bodies.length} batches were created (
            {created.flatMap((id, i) => [
              i > 0 ? ', ' : null,
              <Link key={id} to={`/batches/${id}`}>
                batch {i + 1}
              </Link>,
            ])}
            ), the others were not (below). Creating again makes only the missing ones.
          </Notice>
        )}
        {submitError !== undefined && <ErrorState error={submitError} />}
        <button type="submit" class="primary wide" disabled={submitting || count === 0 || uploading || !!economyMissing}>
          {submitting ? 'Creating…' : bodies.length > 1 ? `Create ${bodies.length} batches` : 'Create batch'}
        </button>
      </form>
    </section>
  );
}

/** "4 to 10 credits per image"; short: "4–10 credits" (a select's label, which must fit a phone). */
function priceRange(m: Model, short = false): string {
  const prices = Object.values(m.creditCost);
  const low = Math.min(...prices);
  const high = Math.max(...prices);
  if (short) return low === high ? `${low} credit${low === 1 ? '' : 's'}` : `${low}–${high} credits`;
  return low === high ? `${low} credit${low === 1 ? '' : 's'} per image` : `${low} to ${high} credits per image`;
}

/**
 * Several batches (a file whose lines set their own options, or more prompts than one batch
 * holds) are priced together before any is created, as the CLI does: a refusal of one (a model,
 * a size, a plan without economy batches), a balance short of them all, or more batches of a
 * tier than the plan has free slots for (the CLI waits for a slot; the page cannot) creates
 * none. Throws what stops them.
 */
async function priceTogether(bodies: BatchBody[]): Promise<void> {
  const [estimates, account] = await Promise.all([
    Promise.all(bodies.map((body) => api<Estimate>('POST', '/batches/estimate', { body }))),
    api<AccountInfo>('GET', '/account'),
  ]);
  const refusal = estimates.find((e) => e.refusal)?.refusal;
  if (refusal) throw new ApiError(400, refusal.code, `${refusal.message} (nothing was created)`, refusal.details);
  const needed = estimates.reduce((sum, e) => sum + e.creditsRequired, 0);
  const { balance } = estimates[0];
  if (needed > balance) {
    throw new ApiError(
      402,
      'insufficient_credits',
      `The ${bodies.length} batches cost ${needed} credits; the balance is ${balance} (nothing was created)`,
      {
        creditsRequired: needed,
        balance,
        batches: bodies.length,
      },
    );
  }
  const { limits } = account;
  for (const tier of ['standard', 'economy'] as const) {
    const batches = bodies.filter((b) => b.tier === tier).length;
    const max = tier === 'economy' ? limits.maxConcurrentEconomyBatches : limits.maxConcurrentBatches;
    const active = tier === 'economy' ? limits.activeEconomyBatches : limits.activeBatches;
    if (batches > 0 && active + batches > max) {
      throw new ApiError(
        403,
        'concurrent_limit_exceeded',
        `The prompts make ${batches} ${tier} batches; your plan runs ${max} at a time and ${active} ${active === 1 ? 'is' : 'are'} running (nothing was created)`,
        { tier, batches, active, max },
      );
    }
  }
}

/** The options a .jsonl line may set, as the page names them. */
const LINE_SETTINGS: Array<[keyof PromptLine['options'], string]> = [
  ['model', 'model'],
  ['aspectRatio', 'aspect ratio'],
  ['resolution', 'resolution'],
  ['countPerCombo', 'images per prompt'],
  ['seed', 'seed'],
  ['note', 'note'],
  ['tier', 'tier'],
];

/** What a file's lines set over the pickers, and the way back to the pickers for every prompt. */
function FileSettings({ lines, economyMissing, onClear }: { lines: PromptLine[]; economyMissing: string | null; onClear: () => void }) {
  const names = LINE_SETTINGS.filter(([key]) => lines.some((l) => l.options[key] !== undefined)).map(([, name]) => name);
  const listed = names.length > 1 ? `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]}` : names[0];
  return (
    <div id="file-settings" data-testid="file-settings">
      <p class="help">
        {listed
          ? `The file's lines set their own ${listed}; the pickers give what a line leaves out.`
          : "The prompts are held as the file's lines give them."}{' '}
        <button type="button" class="small" onClick={onClear}>
          Use the pickers for all
        </button>
      </p>
      {economyMissing && (
        <p class="error-text" role="alert">
          {economyMissing}: pick a model and resolution with economy prices, or use the pickers for all.
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
        <input
          type="radio"
          name="tier"
          value="economy"
          checked={tier === 'economy'}
          disabled={economy === null}
          onChange={() => onPick('economy')}
        />
        {economy === null
          ? `Economy — not at ${resolution} (only ${offered})`
          : `Economy — ${credits(economy)}, ready within ${model.economyWindowHours} hours`}
      </label>
    </fieldset>
  );
}

function EstimateView({
  estimate,
  plan,
  hasPrompts,
  windowHours,
  modelName,
}: {
  estimate: { value?: Estimate[]; error?: unknown };
  plan: BatchPlan;
  hasPrompts: boolean;
  windowHours: number;
  modelName: (key: string) => string;
}) {
  if (!hasPrompts) return <p>Type or drop prompts to see the price.</p>;
  if (estimate.error) {
    return <p class="error-text">{estimate.error instanceof ApiError ? estimate.error.message : describeError(estimate.error)}</p>;
  }
  const all = estimate.value;
  if (!all || all.length !== plan.batches.length) return <p>Pricing…</p>;
  const several = all.length > 1;
  const needed = all.reduce((sum, e) => sum + e.creditsRequired, 0);
  const { balance } = all[0];
  const refusals = [...new Set(all.map((e) => e.refusal?.message).filter((m): m is string => !!m))];
  return (
    <>
      {several ? (
        <BatchTable plan={plan} estimates={all} modelName={modelName} />
      ) : (
        <p class="estimate-line">
          <strong>{formatNumber(all[0].total)}</strong> image{all[0].total === 1 ? '' : 's'} × {all[0].creditCost} ={' '}
          <strong>{formatNumber(all[0].creditsRequired)} credits</strong> <span class="muted">(balance {formatNumber(balance)})</span>
        </p>
      )}
      {several && (
        <p class="estimate-line">
          {formatNumber(all.length)} batches: <strong>{formatNumber(needed)} credits</strong>{' '}
          <span class="muted">(balance {formatNumber(balance)})</span>
        </p>
      )}
      {all.some((e) => e.tier === 'economy') && (
        <p class="help">
          {several ? 'Economy batches' : 'Economy tier'}: every image ready within {windowHours} hours; any not done by then is refunded.
        </p>
      )}
      {refusals.map((message) => (
        <p class="error-text" key={message}>
          {message}
        </p>
      ))}
      {several && needed > balance && refusals.length === 0 && (
        <p class="error-text">
          The {formatNumber(all.length)} batches need {formatNumber(needed)} credits; the balance is {formatNumber(balance)}.
        </p>
      )}
    </>
  );
}

/** What the form creates when it makes several batches: a row per set of settings, with its batches and price. */
function BatchTable({ plan, estimates, modelName }: { plan: BatchPlan; estimates: Estimate[]; modelName: (key: string) => string }) {
  const rows = plan.groups.map((group, g) => {
    const batches = plan.batches.map((b, i) => ({ b, e: estimates[i] })).filter(({ b }) => b.group === g);
    const body = batches[0].b.body;
    const settings = [
      modelName(body.model),
      `${body.aspectRatio} ${body.resolution}`,
      `${body.countPerCombo} per prompt`,
      body.tier,
      ...(typeof group.body.seed === 'number' ? [`seed ${group.body.seed}`] : []),
      ...(body.note ? [`note “${body.note}”`] : []),
    ].join(' · ');
    return {
      settings,
      prompts: group.prompts.length,
      batches: batches.length,
      images: batches.reduce((n, { e }) => n + e.total, 0),
      credits: batches.reduce((n, { e }) => n + e.creditsRequired, 0),
    };
  });
  return (
    <FiguresTable
      class="batch-plan"
      testId="batch-plan"
      caption="What “Create” makes: a batch per set of settings, split to fit your plan"
      columns={['Settings', 'Prompts', 'Batches', 'Images', 'Credits']}
      rows={rows.map((r) => ({ key: r.settings, label: r.settings, figures: [r.prompts, r.batches, r.images, r.credits] }))}
    />
  );
}
