import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, CheckoutAnswer, CreditPack, describeError, LedgerEntry } from '../api';
import { refreshAccount } from '../session';
import { Empty, ErrorState, formatDate, formatNumber, Loading, Notice, PageTitle, useLoad } from '../ui';

/*
 * Buying credits (docs/billing.md): the packs on sale, a Stripe Checkout page for one, and on
 * the way back (?checkout=success&session_id=...) the purchase as it lands in the ledger.
 */

/** The answer of an installation that does not sell credits (no STRIPE_SECRET_KEY). */
export const isPaymentsDisabled = (err: unknown) =>
  err instanceof ApiError && err.status === 404 && err.details.reason === 'payments_disabled';

/** Price in the currency's smallest unit -> "$10.00", "¥1,000". */
export function formatPrice(amount: number, currency: string): string {
  const code = currency.toUpperCase();
  try {
    const format = new Intl.NumberFormat('en-US', { style: 'currency', currency: code });
    const digits = format.resolvedOptions().maximumFractionDigits ?? 2;
    return format.format(amount / 10 ** digits);
  } catch {
    return `${amount} ${code}`;
  }
}

const PURCHASE_KINDS = ['purchase', 'purchase_refund'];
const WAIT_MS = 60_000;

/**
 * After Checkout: waits (polling the ledger) for the session's purchase row, then shows it.
 * Stripe sends the buyer back and Kiln the event separately, so the row may land after the
 * page loaded: `onArrived` lets the page refresh what it showed without it.
 */
function Returned({ sessionId, onArrived }: { sessionId: string; onArrived: () => void }) {
  const [entry, setEntry] = useState<LedgerEntry | null>(null);
  const [gaveUp, setGaveUp] = useState(false);
  useEffect(() => {
    let live = true;
    const deadline = Date.now() + WAIT_MS;
    const poll = async () => {
      try {
        const page = await api<{ entries: LedgerEntry[] }>('GET', '/ledger?limit=20');
        const found = page.entries.find((e) => e.kind === 'purchase' && e.reason?.includes(sessionId));
        if (found && live) {
          setEntry(found);
          onArrived();
          void refreshAccount();
          return;
        }
      } catch {
        // Try again on the next tick; the page says so if it never arrives.
      }
      if (!live) return;
      if (Date.now() > deadline) setGaveUp(true);
      else setTimeout(() => void poll(), 2000);
    };
    void poll();
    return () => {
      live = false;
    };
  }, [sessionId]);
  if (entry)
    return (
      <Notice kind="success">
        <strong>{formatNumber(entry.amount)} credits added.</strong> Your balance is now {formatNumber(entry.balanceAfter)} credits.
      </Notice>
    );
  if (gaveUp)
    return (
      <Notice kind="warn">
        <strong>Payment received; the credits have not arrived yet.</strong> Stripe usually reports a payment within seconds, a bank debit
        within days. They will appear in your balance and below without you doing anything.
      </Notice>
    );
  return <Loading label="Payment received. Waiting for the credits…" />;
}

export function CreditsPage() {
  const params = new URLSearchParams(location.search);
  const packs = useLoad(() => api<{ packs: CreditPack[] }>('GET', '/credit-packs'));
  const receipts = useLoad(() => api<{ entries: LedgerEntry[] }>('GET', '/ledger?limit=100'));
  const [buying, setBuying] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(undefined);

  const buy = async (packId: string) => {
    setBuying(packId);
    setError(undefined);
    try {
      const { url } = await api<CheckoutAnswer>('POST', '/checkout', { body: { packId } });
      location.assign(url);
    } catch (err) {
      setError(err);
      setBuying(null);
    }
  };

  if (packs.error && isPaymentsDisabled(packs.error)) {
    return (
      <section>
        <PageTitle>Buy credits</PageTitle>
        <Notice kind="info">This installation does not sell credits. Its operator grants them.</Notice>
      </section>
    );
  }
  const sessionId = params.get('checkout') === 'success' ? params.get('session_id') : null;
  const purchases = (receipts.data?.entries ?? []).filter((e) => PURCHASE_KINDS.includes(e.kind));
  return (
    <section>
      <PageTitle>Buy credits</PageTitle>
      {sessionId && <Returned sessionId={sessionId} onArrived={receipts.reload} />}
      {params.get('checkout') === 'cancelled' && <Notice kind="info">Checkout cancelled: nothing was charged.</Notice>}
      {packs.loading && !packs.data && <Loading label="Loading credit packs…" />}
      {packs.error !== undefined && <ErrorState error={packs.error} onRetry={packs.reload} />}
      {packs.data && packs.data.packs.length === 0 && <Empty title="No credit packs on sale right now." />}
      {error !== undefined && (
        <div class="notice notice-error" role="alert">
          <p>{describeError(error)}</p>
        </div>
      )}
      <div class="stats packs" data-testid="credit-packs">
        {packs.data?.packs.map((p) => (
          <div class="stat" key={p.id}>
            <p class="stat-label">{p.name}</p>
            <p class="stat-value">
              {formatNumber(p.credits)} <span class="unit">credits</span>
            </p>
            <p>{formatPrice(p.priceCents, p.currency)}</p>
            <button type="button" class="primary" disabled={buying !== null} onClick={() => void buy(p.id)}>
              {buying === p.id ? 'Opening checkout…' : 'Buy'}
            </button>
          </div>
        ))}
      </div>
      <p>Payment is taken by Stripe. A refunded purchase takes its credits back, even if they were spent.</p>
      <h2>Purchases</h2>
      {receipts.error !== undefined && <ErrorState error={receipts.error} onRetry={receipts.reload} />}
      {receipts.data && purchases.length === 0 && <p>No purchases yet.</p>}
      {purchases.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Date</th>
                <th scope="col">Credits</th>
                <th scope="col">Details</th>
              </tr>
            </thead>
            <tbody>
              {purchases.map((e) => (
                <tr key={e.id}>
                  <td>{formatDate(e.createdAt)}</td>
                  <td>{formatNumber(e.amount)}</td>
                  <td class="details">{e.reason}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
