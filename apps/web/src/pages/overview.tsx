import { useEffect, useRef, useState } from 'preact/hooks';
import { api, Usage } from '../api';
import { Link } from '../router';
import { useSession } from '../session';
import { ErrorState, formatNumber, Loading, Notice, PageTitle, useLoad } from '../ui';

interface DaySeries {
  days: string[];
  images: number[];
  credits: number[];
}

/** 30 UTC days, oldest first, zero where nothing happened. */
export function dailySeries(usage: Usage, days = 30): DaySeries {
  const start = Date.parse(usage.since + 'T00:00:00Z');
  const labels = Array.from({ length: days }, (_, i) => new Date(start + i * 86_400_000).toISOString().slice(0, 10));
  const images = new Map(usage.images.map((d) => [d.day, d.succeeded]));
  const credits = new Map<string, number>();
  for (const d of usage.days) credits.set(d.day, (credits.get(d.day) ?? 0) + d.charged - d.refunded);
  return { days: labels, images: labels.map((d) => images.get(d) ?? 0), credits: labels.map((d) => credits.get(d) ?? 0) };
}

/**
 * How credits come on this installation: bought, where it sells them; else from its
 * operator, whose one command is shown (on a development start the newcomer is the operator).
 */
export function howToGetCredits(purchasesEnabled: boolean, email: string) {
  if (purchasesEnabled)
    return (
      <>
        Batches need credits: <Link to="/credits">buy credits</Link>.
      </>
    );
  return (
    <>
      Batches need credits, which this installation's operator grants: <code>npm run kiln-admin -- grant {email} 1000</code> in Kiln's
      folder.
    </>
  );
}

export function OverviewPage() {
  const session = useSession();
  const usage = useLoad(() => api<Usage>('GET', '/usage?days=30'));
  if (session.kind !== 'signed-in') return null;
  const { account, limits, purchasesEnabled } = session.info;

  return (
    <section>
      <PageTitle>Overview</PageTitle>
      {account.balance <= 0 && (
        <Notice kind="warn">
          <strong>No credits.</strong> {howToGetCredits(purchasesEnabled, account.email)}
        </Notice>
      )}
      {!limits.apiAccess && (
        <Notice kind="info">
          <strong>No API access on the {account.plan} plan.</strong> The dashboard works on every plan; API keys need a paid plan, which an
          operator sets.
        </Notice>
      )}
      <div class="stats">
        <div class="stat">
          <p class="stat-label">Balance</p>
          <p class="stat-value" data-testid="balance">
            {formatNumber(account.balance)} <span class="unit">credits</span>
          </p>
        </div>
        <div class="stat">
          <p class="stat-label">Plan</p>
          <p class="stat-value">{account.plan}</p>
        </div>
        <div class="stat">
          <p class="stat-label">Running batches</p>
          <p class="stat-value">
            {limits.activeBatches} <span class="unit">of {limits.maxConcurrentBatches}</span>
          </p>
        </div>
      </div>
      <h2>Plan limits</h2>
      <dl class="limits">
        <dt>Images per batch</dt>
        <dd>{formatNumber(limits.maxImagesPerBatch)}</dd>
        <dt>Batches at once</dt>
        <dd>{limits.maxConcurrentBatches}</dd>
        <dt>API keys</dt>
        <dd>{limits.maxKeys}</dd>
        <dt>API access</dt>
        <dd>{limits.apiAccess ? 'yes' : 'no'}</dd>
        <dt>Requests per minute per key</dt>
        <dd>{limits.requestsPerMinute}</dd>
      </dl>
      <h2>Last 30 days</h2>
      {usage.loading && !usage.data && <Loading label="Loading usage…" />}
      {usage.error !== undefined && <ErrorState error={usage.error} onRetry={usage.reload} />}
      {usage.data && <UsageChart series={dailySeries(usage.data)} totals={usage.data.totals} />}
      <p>
        <Link to="/batches/new" class="button primary">
          New batch
        </Link>
      </p>
    </section>
  );
}

/** The days the chart draws: from the first active day (the last 7 at least), not 30 mostly empty ones. */
export function activeSpan(series: DaySeries, min = 7): number {
  const first = series.days.findIndex((_, i) => series.images[i] > 0 || series.credits[i] !== 0);
  return first < 0 ? series.days.length : Math.min(first, Math.max(0, series.days.length - min));
}

const MEASURES = {
  images: { label: 'Images', color: '#9a3412' },
  credits: { label: 'Credits', color: '#1d4ed8' },
} as const;

function UsageChart({ series, totals }: { series: DaySeries; totals: Usage['totals'] }) {
  const box = useRef<HTMLDivElement>(null);
  const [measure, setMeasure] = useState<keyof typeof MEASURES>('images');
  const empty = series.images.every((v) => v === 0) && series.credits.every((v) => v === 0);
  useEffect(() => {
    if (empty || !box.current) return;
    let chart: { destroy(): void; setSize(s: { width: number; height: number }): void } | null = null;
    let live = true;
    const el = box.current;
    // uPlot is loaded with the chart, not with the first page.
    void import('./usage-chart').then(({ drawUsageChart }) => {
      if (!live) return;
      const from = activeSpan(series);
      chart = drawUsageChart(el, { days: series.days.slice(from), values: series[measure].slice(from), ...MEASURES[measure] });
    });
    const resize = new ResizeObserver(() => chart?.setSize({ width: el.clientWidth, height: 240 }));
    resize.observe(el);
    return () => {
      live = false;
      resize.disconnect();
      chart?.destroy();
    };
  }, [series, empty, measure]);

  const images = series.images.reduce((a, b) => a + b, 0);
  return (
    <figure class="chart">
      <figcaption>
        {formatNumber(images)} images made; {formatNumber(totals.charged - totals.refunded)} credits spent ({formatNumber(totals.refunded)}{' '}
        refunded).
      </figcaption>
      {!empty && (
        <fieldset class="segmented">
          <legend class="sr-only">Chart shows</legend>
          {(Object.keys(MEASURES) as Array<keyof typeof MEASURES>).map((m) => (
            <label key={m} class="check">
              <input type="radio" name="measure" value={m} checked={measure === m} onChange={() => setMeasure(m)} />
              {MEASURES[m].label} per day
            </label>
          ))}
        </fieldset>
      )}
      {empty ? (
        <p class="empty-title">No activity in the last 30 days.</p>
      ) : (
        <div ref={box} class="chart-box" role="img" aria-label={`${MEASURES[measure].label} per day (UTC)`} />
      )}
      {!empty && (
        <details>
          <summary>Per-day figures</summary>
          <table>
            <thead>
              <tr>
                <th scope="col">Day (UTC)</th>
                <th scope="col">Images</th>
                <th scope="col">Credits</th>
              </tr>
            </thead>
            <tbody>
              {series.days.map((d, i) =>
                series.images[i] || series.credits[i] ? (
                  <tr key={d}>
                    <td>{d}</td>
                    <td>{series.images[i]}</td>
                    <td>{series.credits[i]}</td>
                  </tr>
                ) : null,
              )}
            </tbody>
          </table>
        </details>
      )}
    </figure>
  );
}
