import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { KilnMetrics } from '@app/metrics';
import {
  FailoverKind,
  failoverOf,
  hasBatchApi,
  isProviderError,
  pairsRouteCannotMake,
  ProviderError,
  ProviderRoute,
  routeBatchSettings,
  UpstreamBatchApi,
  UpstreamBatchRef,
  UpstreamBatchStatus,
} from '@app/providers';
import { ClaimedTask, EconomyBatches, UpstreamBatchStore, UpstreamGroup } from '@app/tasks';
import { UPSTREAM_BATCH_STATES } from '@app/database';
import { PrioritySemaphore } from '../limits/priority-semaphore';
import { ProviderRegistry } from '../running/provider-registry';
import { routeMetricsLabel } from '../limits/route-circuit';
import { failoverKind } from '../running/route-failover';
import { describeError } from '../running/task-failure';
import { StoreEconomyResult } from '../running/usecases/store-economy-result.usecase';

/** Groups one generator works on at once (each a few calls, or one results stream). */
const MAX_WORKING = 8;
/** Results of one upstream batch being stored and recorded at once (successes are group-committed). */
const RESULT_CONCURRENCY = 8;
/**
 * Failed lines of a read written together, one transaction (TaskFailures.failMany's chunk of
 * MAX_GROUP): a 10,000-line batch whose lines all failed is 40 transactions, not 10,000.
 */
const FAILED_LINES_CHUNK = 250;
/**
 * The longest a failed line read waits for others before its chunk is written anyway: a slow
 * or stalled results stream still ends its tasks about as it reads them.
 */
const FAILED_LINES_WAIT_MS = 1000;
/**
 * Upstream batches whose results one generator reads at once: each holds its tasks' rows (up
 * to maxRequests) while it reads, so five 10,000-line batches ending together are read two at
 * a time, not all at once (memory, and CPU left for standard work).
 */
const MAX_READING = 2;
/** Groups one route may form in one tick (each up to maxRequests lines). */
const MAX_FORMS_PER_TICK = 20;
/** Tries at an upload or a create through passing trouble before the group's tasks are failed and refunded. */
const MAX_SUBMIT_TRIES = 8;
/** The longest wait before a step is tried again after passing trouble. */
const MAX_BACKOFF_MS = 5 * 60_000;
/** How often economy batches past their window are looked for. */
const EXPIRY_EVERY_MS = 10_000;

/** What a failed line or a group's failure says, with its error code (task-failure.ts classifies). */
const NEVER_RAN: Record<string, string> = {
  expired: 'The upstream batch expired before this image was made',
  failed: 'The upstream batch failed before this image was made',
  cancelled: 'The upstream batch was cancelled before this image was made',
  completed: 'The upstream batch ended without a result for this image',
};

/** The failover kind of what an upstream batch that ended so never ran: failed is the upstream's trouble, expired its slowness. */
const NEVER_RAN_KIND: Record<string, FailoverKind> = { failed: 'server_error', expired: 'timeout' };

/**
 * One route's share of open economy batches: the route (routes[index] of their chain, or
 * their provider alone) and, on a chain, the waiting tasks it takes (route_index in
 * [fromIndex, index]: the first route that runs batches at or after the task's own).
 */
interface EconomyRoute {
  model: string;
  provider: ProviderRoute;
  batchIds: string[];
  chain: { index: number; fromIndex: number } | null;
}

/** The routes economy tasks of these batches go to: on a chain, each route that runs batches, with the tasks it takes. */
export function economyRoutesOf(batches: EconomyBatches): EconomyRoute[] {
  const chain = batches.routes && batches.routes.length > 1 ? batches.routes : null;
  if (!chain) return [{ model: batches.model, provider: batches.provider, batchIds: batches.batchIds, chain: null }];
  const routes: EconomyRoute[] = [];
  let fromIndex = 0;
  chain.forEach((provider, index) => {
    if (!hasBatchApi(provider)) return;
    routes.push({ model: batches.model, provider, batchIds: batches.batchIds, chain: { index, fromIndex } });
    fromIndex = index + 1;
  });
  return routes;
}

/**
 * Where a task whose upstream batch failed it goes next: the next route of its batch's chain
 * after its own that runs batches (and, with failover.sizes 'primary', makes its pair), when
 * the failure's kind fails over (failover.on); else null (it fails, as on one route).
 */
export function nextEconomyRoute(claim: ClaimedTask, kind: FailoverKind | null): number | null {
  const batch = claim.batch;
  const chain = batch?.routes && batch.routes.length > 1 ? batch.routes : null;
  if (!batch || !chain || !kind) return null;
  const settings = failoverOf(batch.failover);
  if (!settings.on.includes(kind)) return null;
  const pair = { [batch.aspectRatio]: [batch.resolution as '1K'] };
  for (let i = claim.routeIndex + 1; i < chain.length; i++) {
    if (!hasBatchApi(chain[i])) continue;
    if (settings.sizes === 'primary' && pairsRouteCannotMake(chain[i], pair).length > 0) continue;
    return i;
  }
  return null;
}

/**
 * The economy tier's collector (spec extensions v1.2 section 4), one per generator and apart
 * from the task queue, so standard tasks never wait behind economy work and no worker of
 * GENERATOR_CONCURRENCY is held while an upstream batch runs.
 *
 * Each tick: per route with an enabled batch API, the waiting economy tasks are gathered into
 * a group once the oldest has waited `collectMs` or `maxRequests` (or the API's maxLines /
 * maxInputBytes) are waiting; then every due group is advanced one step at a time, each
 * recorded before the next (UpstreamBatchStore):
 *
 *   form (tasks -> running, upstream_batch_id: BEFORE the upload)
 *   -> upload (input id recorded) -> find-or-create (upstream batch id recorded BEFORE waiting)
 *   -> poll every pollIntervalMs (no lease held between polls) -> ended: results streamed,
 *   each image stored and recorded like a standard task's, each failed line failed and
 *   refunded with its own code; what the upstream never ran is failed and refunded.
 *
 * A crash at any step: the group's lease runs out (UPSTREAM_LEASE_MS) and any generator takes
 * it up at the step recorded last. Before the input id is recorded the lines are uploaded
 * again (an unused input is never billed); before the upstream batch id is recorded the
 * batch is looked for by the group id it carries (findBatch) and created only if not found;
 * while reading results, tasks already recorded are skipped. So no task is ever in two
 * upstream batches and none is lost. Economy batches past their window have their unfinished
 * tasks failed and refunded (upstream_unavailable).
 */
@Injectable()
export class EconomyCollector {
  private readonly logger = new Logger(EconomyCollector.name);
  /** This process, as written on the groups it holds. */
  readonly id = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly working = new Map<string, Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private stopped = true;
  private lastExpiry = 0;
  private readonly abort = new AbortController();
  private readonly reading = new PrioritySemaphore(MAX_READING);

  constructor(
    private readonly store: UpstreamBatchStore,
    private readonly providers: ProviderRegistry,
    private readonly results: StoreEconomyResult,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    private readonly metrics: KilnMetrics,
  ) {
    metrics.onCollect(async () => {
      const { byState, waitingLines } = await this.store.stats();
      for (const state of UPSTREAM_BATCH_STATES.filter((s) => s !== 'read' && s !== 'failed'))
        metrics.economyUpstreamBatches.set({ state }, byState[state] ?? 0);
      metrics.economyTasksWaiting.set(waitingLines);
    });
  }

  /** Groups this generator is working on now. */
  get activeGroups(): number {
    return this.working.size;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.timer = setInterval(() => void this.tick(), this.config.generator.economyTickMs);
    this.timer.unref();
    void this.tick();
  }

  /** Stops taking work, interrupts the groups in hand and lets go of them for the next generator. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.abort.abort(new Error('The economy collector is stopping'));
    await Promise.race([Promise.allSettled([this.ticking, ...this.working.values()]), new Promise((r) => setTimeout(r, 5000).unref())]);
    const released = await this.store.releaseAll(this.id).catch(() => 0);
    if (released > 0) this.logger.log(`Gave back ${released} upstream batch(es) for the next generator`);
  }

  /** One pass (tests call it directly): form due groups, advance due ones, expire past windows. */
  tick(): Promise<void> {
    if (this.ticking || this.stopped) return this.ticking ?? Promise.resolve();
    this.ticking = this.pass()
      .catch((err) => this.logger.warn(`Economy collector pass failed: ${describeError(err)}`))
      .finally(() => {
        this.ticking = null;
      });
    return this.ticking;
  }

  private async pass(): Promise<void> {
    if (Date.now() - this.lastExpiry >= EXPIRY_EVERY_MS) {
      this.lastExpiry = Date.now();
      await this.expire();
    }
    for (const route of (await this.store.economyRoutes()).flatMap(economyRoutesOf)) {
      if (this.stopped) return;
      await this.formGroups(route).catch((err) =>
        this.logger.warn(`Could not gather economy tasks of ${route.model}: ${describeError(err)}`),
      );
    }
    const room = MAX_WORKING - this.working.size;
    if (room <= 0 || this.stopped) return;
    for (const group of await this.store.leaseDue(this.id, this.leaseMs, room)) void this.work(group, null);
  }

  private get leaseMs(): number {
    return this.config.generator.upstreamLeaseMs;
  }

  /** Waiting tasks of one route into as many groups as are due. */
  private async formGroups(route: EconomyRoute): Promise<void> {
    const settings = routeBatchSettings(route.provider);
    if (!settings) return;
    let api: UpstreamBatchApi | null;
    try {
      api = this.providers.forBatchRoute(route.provider);
    } catch (err) {
      // A missing key: the tasks wait (an operator may set it) and are refunded when their window ends.
      this.logger.warn(`Economy tasks of ${route.model} wait: ${describeError(err)}`);
      return;
    }
    if (!api) return;
    const cap = Math.max(1, Math.min(settings.maxRequests, api.maxLines));
    for (let formed = 0; formed < MAX_FORMS_PER_TICK && !this.stopped && this.working.size < MAX_WORKING; formed++) {
      const gathered = await this.gather(api, route, cap, settings.collectMs);
      if (!gathered) return;
      const { lines, ids, full } = gathered;
      const group = await this.store.formGroup({ model: route.model, provider: route.provider, index: route.chain?.index }, ids, {
        poller: this.id,
        leaseMs: this.leaseMs,
      });
      if (!group) return;
      this.logger.log(`Upstream batch ${group.id} formed for ${route.model}: ${group.tasks.length} task(s)`);
      this.metrics.economyUpstreamBatchesFormed.inc({ model: route.model });
      // Uploaded and created before the next group is gathered: one group's tasks and lines in memory at a time.
      await this.work(
        {
          id: group.id,
          model: route.model,
          provider: route.provider,
          state: 'collecting',
          lines: group.tasks.length,
          inputId: null,
          upstreamBatchId: null,
          upstreamState: null,
          found: null,
          outcome: null,
          upstreamStatus: null,
          tries: 0,
        },
        lines,
      );
      if (!full) return;
    }
  }

  /**
   * The waiting tasks of a route as lines, if a group of them is due. Only the lines and ids
   * leave here: the task rows are dropped before the upload (10,000 of them per group).
   */
  private async gather(
    api: UpstreamBatchApi,
    route: EconomyRoute,
    cap: number,
    collectMs: number,
  ): Promise<{ lines: Map<string, string>; ids: string[]; full: boolean } | null> {
    const waiting = await this.store.waitingTasks(route.batchIds, cap, route.chain ?? undefined);
    if (waiting.length === 0) return null;
    const due = waiting.length >= cap || waiting[0].createdAt.getTime() <= Date.now() - collectMs;
    if (!due) return null;
    const { lines, refused } = await this.encode(api, waiting);
    return { lines, ids: [...lines.keys(), ...refused.keys()], full: waiting.length >= cap };
  }

  /**
   * Each task's line, within the API's byte cap (the first tasks that fit); a task whose line
   * cannot be made (a reference image gone) goes into the group too and is failed at once.
   */
  private async encode(
    api: UpstreamBatchApi,
    tasks: readonly ClaimedTask[],
  ): Promise<{ lines: Map<string, string>; refused: Map<string, unknown> }> {
    const lines = new Map<string, string>();
    const refused = new Map<string, unknown>();
    let bytes = 0;
    for (const task of tasks) {
      try {
        const line = api.encodeLine({ key: task.id, request: await this.results.batchLineRequest(task) });
        const size = Buffer.byteLength(line) + 1;
        if (bytes + size > api.maxInputBytes && lines.size > 0) break;
        bytes += size;
        lines.set(task.id, line);
      } catch (err) {
        refused.set(task.id, err);
      }
    }
    return { lines, refused };
  }

  /** Advances the group, counted in `working` (the shutdown waits for it); resolves when this step of it is done. */
  private work(group: UpstreamGroup, prepared: Map<string, string> | null): Promise<void> {
    const run = this.advance(group, prepared)
      .catch((err) => this.logger.warn(`Upstream batch ${group.id}: ${describeError(err)}`))
      .finally(() => this.working.delete(group.id));
    this.working.set(group.id, run);
    return run;
  }

  /** Takes the group from its recorded step as far as it goes now, recording each step. */
  private async advance(group: UpstreamGroup, prepared: Map<string, string> | null): Promise<void> {
    const renewal = setInterval(
      () => void this.store.renew(group.id, this.id, this.leaseMs).catch(() => undefined),
      Math.max(200, Math.floor(this.leaseMs / 3)),
    );
    renewal.unref();
    const signal = this.abort.signal;
    let api: UpstreamBatchApi | null = null;
    try {
      api = this.providers.forBatchRoute(group.provider);
      if (!api) throw new ProviderError('not_configured', `The route of model ${group.model} no longer has an enabled batch API`);
      if (group.state === 'collecting') {
        const lines = await this.linesOf(api, group, prepared);
        if (lines.length === 0) {
          await this.store.recordRead(group.id, this.id, { succeeded: 0, failed: 0 });
          return;
        }
        const { inputId } = await api.uploadInput(lines, group.id, signal);
        if (!(await this.store.recordInput(group.id, this.id, inputId))) return;
        group.inputId = inputId;
        group.state = 'uploaded';
      }
      if (group.state === 'uploaded') {
        // A crash between the upstream's create and Kiln's record left a batch carrying the group id: found again, never made twice.
        const ref = (await api.findBatch(group.id, signal)) ?? (await api.createBatch(group.inputId!, group.id, signal));
        await this.store.recordCreated(group.id, this.id, ref, new Date(Date.now() + api.pollIntervalMs));
        this.logger.log(`Upstream batch ${group.id} created upstream as ${ref.batchId}`);
        return;
      }
      const ref: UpstreamBatchRef = { batchId: group.upstreamBatchId!, state: group.upstreamState ?? {} };
      if (group.state === 'created') {
        const status = await api.poll(ref, signal);
        if (status.state === 'waiting') {
          await this.store.recordWaiting(
            group.id,
            this.id,
            status.upstreamStatus,
            new Date(Date.now() + Math.max(api.pollIntervalMs, status.retryAfterMs ?? 0)),
          );
          return;
        }
        if (!(await this.store.recordEnded(group.id, this.id, status))) return;
        group.state = 'ended';
        group.outcome = status.outcome;
        group.found = status.found;
        group.upstreamStatus = status.upstreamStatus;
      }
      if (group.state === 'ended') await this.reading.use(0, signal, () => this.readResults(api!, group, ref));
    } catch (err) {
      await this.afterTrouble(group, err).catch((e) =>
        this.logger.warn(`Upstream batch ${group.id}: could not record its trouble: ${describeError(e)}`),
      );
    } finally {
      clearInterval(renewal);
    }
  }

  /** The group's lines: those just made when it was formed, else made again from its tasks (a crash before the input was recorded). */
  private async linesOf(api: UpstreamBatchApi, group: UpstreamGroup, prepared: Map<string, string> | null): Promise<string[]> {
    const lines: string[] = [];
    let missing: string[] | undefined;
    if (prepared) {
      // Only the ids are read again (which of the group's tasks are still running): their lines are made.
      missing = [];
      for (const id of await this.store.runningTaskIds(group.id)) {
        const ready = prepared.get(id);
        if (ready !== undefined) lines.push(ready);
        else missing.push(id);
      }
      prepared.clear();
      if (missing.length === 0) return lines;
    }
    const refused: { claim: ClaimedTask; err: unknown }[] = [];
    for (const task of await this.store.runningTasks(group.id, missing)) {
      try {
        lines.push(api.encodeLine({ key: task.id, request: await this.results.batchLineRequest(task) }));
      } catch (err) {
        refused.push({ claim: task, err });
      }
    }
    await this.results.failBatchTasks(refused);
    return lines;
  }

  /**
   * Streams the ended batch's results: each image stored and recorded, the failed lines
   * gathered and failed and refunded together (up to FAILED_LINES_CHUNK per transaction, each
   * with its own code); then whatever the upstream never ran. Tasks already ended (an earlier
   * read cut short by a crash, the window's end) are not in the map and are skipped; a failed
   * line gathered but not yet written at a crash leaves its task running, so the next read
   * fails it then.
   */
  private async readResults(api: UpstreamBatchApi, group: UpstreamGroup, ref: UpstreamBatchRef): Promise<void> {
    const tasks = new Map((await this.store.runningTasks(group.id)).map((t) => [t.id, t]));
    const ended: Extract<UpstreamBatchStatus, { state: 'ended' }> = {
      state: 'ended',
      upstreamStatus: group.upstreamStatus ?? '',
      outcome: (group.outcome ?? 'completed') as 'completed',
      found: group.found ?? {},
    };
    let succeeded = 0;
    let failed = 0;
    let trouble: { err: unknown } | null = null;
    const inFlight = new Set<Promise<void>>();
    const track = (write: Promise<void>): void => {
      const done: Promise<void> = write
        .catch((err) => {
          trouble ??= { err };
        })
        .finally(() => inFlight.delete(done));
      inFlight.add(done);
    };
    let failing: { claim: ClaimedTask; err: unknown }[] = [];
    let failingTimer: NodeJS.Timeout | null = null;
    const writeFailures = (): void => {
      if (failingTimer) clearTimeout(failingTimer);
      failingTimer = null;
      if (failing.length === 0) return;
      const chunk = failing;
      failing = [];
      // A line that failed with a failover kind (a 5xx) moves to the chain's next batch route:
      // the upstream did not make it, so it bills nothing for it.
      track(
        this.failOrMove(
          group,
          chunk.map(({ claim, err }) => ({ claim, err, kind: failoverKind(err) })),
        ).then((n) => {
          failed += this.lines(group, 'failed', n);
        }),
      );
    };
    try {
      for await (const line of api.results(ref, ended, this.abort.signal)) {
        if (trouble) break;
        const task = tasks.get(line.key);
        if (task) {
          tasks.delete(line.key);
          if (line.ok) {
            track(
              this.results.storeBatchResult(task, line.image).then((o) => {
                if (o === 'succeeded') succeeded += this.line(group, 'succeeded');
              }),
            );
          } else {
            failing.push({ claim: task, err: line.error });
            if (failing.length >= FAILED_LINES_CHUNK) writeFailures();
            else failingTimer ??= setTimeout(writeFailures, FAILED_LINES_WAIT_MS);
          }
        }
        if (inFlight.size >= RESULT_CONCURRENCY) await Promise.race(inFlight);
      }
    } finally {
      // The failed lines read so far are written even when the stream fails (or a shutdown
      // aborts it): they are the upstream's answer, and a read again would only fail them again.
      writeFailures();
      // No store or record is left running unawaited.
      await Promise.all(inFlight);
    }
    if (trouble) throw (trouble as { err: unknown }).err;
    // What the upstream never ran: failed and refunded a chunk of tasks per transaction (a
    // 10,000-line batch that expired unrun is a few dozen transactions, not 10,000).
    const neverRan = new ProviderError('upstream_error', NEVER_RAN[ended.outcome] ?? NEVER_RAN.completed, { retryable: false });
    // What an upstream batch that failed or expired never ran moves to the chain's next batch
    // route (server_error, timeout); nothing of it runs any more, so nothing is paid twice.
    const kind = NEVER_RAN_KIND[ended.outcome] ?? null;
    const unrun = await this.failOrMove(
      group,
      [...tasks.values()].map((claim) => ({ claim, err: neverRan, kind })),
    );
    tasks.clear();
    failed += this.lines(group, 'never_ran', unrun);
    await this.store.recordRead(group.id, this.id, { succeeded, failed });
    this.logger.log(`Upstream batch ${group.id} read (${ended.outcome}): ${succeeded} succeeded, ${failed} failed`);
  }

  /**
   * A step's trouble. The upstream's refusal of the group (not retryable) fails and refunds its
   * unfinished tasks with the refusal's code; passing trouble (the network, a 5xx, Kiln's own
   * storage or database, a shutdown) lets the group go to be tried again, with a backoff, by
   * any generator. An upload or create that keeps failing gives up after MAX_SUBMIT_TRIES.
   */
  private async afterTrouble(group: UpstreamGroup, err: unknown): Promise<void> {
    if (this.stopped) {
      await this.store.retryLater(group.id, this.id, 'generator stopping', new Date());
      return;
    }
    const submitting = group.state === 'collecting' || group.state === 'uploaded';
    const refused = isProviderError(err) && !err.retryable;
    if (refused || (submitting && group.tries + 1 >= MAX_SUBMIT_TRIES)) {
      this.logger.warn(`Upstream batch ${group.id} failed at ${group.state}: ${describeError(err)}; failing its tasks`);
      // Before its input was uploaded no upstream batch of the group can exist: its tasks move
      // to the chain's next batch route when the trouble fails over. Past the upload a create
      // whose answer was lost may have made one (found again by its group id only on this
      // route), so they fail, as on one route. A chunk of tasks per transaction, as in readResults.
      const kind = group.state === 'collecting' ? failoverKind(err) : null;
      const failed = await this.failOrMove(
        group,
        (await this.store.runningTasks(group.id)).map((claim) => ({ claim, err, kind })),
      );
      await this.store.recordFailed(group.id, this.id, describeError(err).slice(0, 500), failed);
      return;
    }
    const interval = routeBatchSettings(group.provider)?.pollIntervalMs ?? 30_000;
    const backoff = Math.min(MAX_BACKOFF_MS, Math.min(interval, 30_000) * 2 ** Math.min(group.tries, 8));
    const retryAfter = isProviderError(err) ? (err.retryAfterMs ?? 0) : 0;
    this.logger.warn(
      `Upstream batch ${group.id} at ${group.state}: ${describeError(err)}; trying again in ${Math.max(backoff, retryAfter)} ms`,
    );
    await this.store.retryLater(group.id, this.id, describeError(err).slice(0, 500), new Date(Date.now() + Math.max(backoff, retryAfter)));
  }

  /**
   * Tasks of a group its upstream batch did not make: each moved to the next route of its
   * chain that runs batches when its failure's kind fails over (nextEconomyRoute; back to
   * pending, for that route's next group), else failed and refunded (failBatchTasks). A task
   * whose batch was cancelled meanwhile is failed. Answers how many failed.
   */
  private async failOrMove(
    group: UpstreamGroup,
    failures: { claim: ClaimedTask; err: unknown; kind: FailoverKind | null }[],
  ): Promise<number> {
    const failing: { claim: ClaimedTask; err: unknown }[] = [];
    const byNext = new Map<number, { claim: ClaimedTask; err: unknown; kind: FailoverKind }[]>();
    for (const f of failures) {
      const next = nextEconomyRoute(f.claim, f.kind);
      if (next === null) failing.push(f);
      else byNext.set(next, [...(byNext.get(next) ?? []), { ...f, kind: f.kind! }]);
    }
    for (const [next, moving] of byNext) {
      const moved = new Set(
        await this.store.moveToRoute(
          group.id,
          moving.map(({ claim }) => ({ id: claim.id, attempts: claim.attempts })),
          next,
        ),
      );
      for (const m of moving) {
        if (!moved.has(m.claim.id)) {
          failing.push(m);
          continue;
        }
        const chain = m.claim.batch!.routes!;
        this.metrics.routeFailover.inc({
          model: group.model,
          from: routeMetricsLabel(m.claim.routeIndex, chain[m.claim.routeIndex]),
          to: routeMetricsLabel(next, chain[next]),
          reason: m.kind,
        });
      }
      if (moved.size > 0) this.logger.log(`Upstream batch ${group.id}: ${moved.size} task(s) moved to route ${next} of their chain`);
    }
    if (failing.length === 0) return 0;
    return (await this.results.failBatchTasks(failing)).filter((o) => o === 'failed').length;
  }

  /** Counts one task ended from its upstream batch; answers 1. */
  private line(group: UpstreamGroup, outcome: 'succeeded' | 'failed' | 'never_ran'): number {
    return this.lines(group, outcome, 1);
  }

  /** Counts `count` tasks ended from its upstream batch alike; answers `count`. */
  private lines(group: UpstreamGroup, outcome: 'succeeded' | 'failed' | 'never_ran', count: number): number {
    if (count > 0) this.metrics.economyLines.inc({ model: group.model, outcome }, count);
    return count;
  }

  /** Economy batches past their window: their unfinished tasks failed and refunded. */
  private async expire(): Promise<void> {
    for (const batchId of await this.store.expiredBatches(50)) {
      const ended = await this.store.expireBatch(batchId).catch((err) => {
        this.logger.warn(`Could not end economy batch ${batchId} at its window: ${describeError(err)}`);
        return null;
      });
      if (ended && ended.count > 0) {
        this.logger.log(`Economy batch ${batchId}: ${ended.count} task(s) failed and refunded at the end of its window`);
        this.metrics.economyLines.inc({ model: ended.model, outcome: 'expired' }, ended.count);
      }
    }
  }
}
