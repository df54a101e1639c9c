import { newObjectToken } from '@app/storage';
import { queryRows } from '@app/database';
import { FencedWrites, lockBatchesInIdOrder, retryingDeadlocks, statusIs } from './fenced-write';

/** A group the collector recorded: its id (Kiln's group id) and the tasks taken into it, each with its fence. */
export interface FormedGroup {
  id: string;
  tasks: { id: string; attempts: number; batchId: string }[];
}

/** The progress an economy task shows once it is in an upstream batch. */
const SUBMITTED_PROGRESS = 10;

/**
 * The economy tier's submit (`pending` -> `running`, attempts + 1, sent, upstream_batch_id
 * set), recorded with its group's row in upstream_batches BEFORE the group's input is
 * uploaded: a crash after this point resumes the group, never submits its tasks in another.
 * Only `pending` economy tasks not in a group are taken, their batches locked first and in
 * id order (a cancel racing the collector waits for it, then finds the tasks sent and leaves
 * them to finish); tasks another statement holds are skipped. A task's first move also gives
 * it its result token, as a claim does. An empty take records nothing.
 */
export class TaskEconomySubmits {
  constructor(private readonly writes: FencedWrites) {}

  async formGroup(
    route: { model: string; provider: object; index?: number },
    taskIds: readonly string[],
    hold: { poller: string; leaseMs: number },
  ): Promise<FormedGroup | null> {
    if (taskIds.length === 0) return null;
    const result = await retryingDeadlocks(() =>
      this.writes.db.transaction(async (m) => {
        const [{ id }] = await queryRows<{ id: string }>(
          m,
          `INSERT INTO upstream_batches (model, provider, lines, state, poller, lease_until)
           VALUES ($1, $2::jsonb, 0, 'collecting', $3, now() + $4::int * interval '1 millisecond') RETURNING id`,
          [route.model, JSON.stringify(route.provider), hold.poller, hold.leaseMs],
        );
        const tasks = await queryRows<{ id: string; attempts: number; batch_id: string }>(
          m,
          `WITH input AS (
             SELECT * FROM unnest($1::uuid[], $2::text[]) AS i(id, token)
           ), locked AS (
             ${lockBatchesInIdOrder('id IN (SELECT batch_id FROM tasks WHERE id = ANY($1::uuid[]))')}
           ), free AS (
             SELECT t.id FROM tasks t
              WHERE t.id = ANY($1::uuid[]) AND ${statusIs('t', 'pending')} AND t.tier = 'economy' AND t.upstream_batch_id IS NULL
                AND t.batch_id IN (SELECT id FROM locked)
              FOR UPDATE SKIP LOCKED
           ), taken AS (
             UPDATE tasks t SET status = 'running', attempts = t.attempts + 1, upstream_batch_id = $3, route_index = COALESCE($4::smallint, t.route_index),
                    sent_at = now(), progress = ${SUBMITTED_PROGRESS}, started_at = COALESCE(t.started_at, now()), updated_at = now(),
                    result_token = COALESCE(t.result_token, i.token)
               FROM input i
              WHERE t.id = i.id AND t.id IN (SELECT id FROM free)
              RETURNING t.id, t.attempts, t.batch_id
           ), touched AS (
             UPDATE batches SET status = CASE WHEN status = 'pending' THEN 'running' ELSE status END, version = version + 1
              WHERE id IN (SELECT batch_id FROM taken)
           )
           SELECT * FROM taken`,
          [taskIds, taskIds.map(() => newObjectToken()), id, route.index ?? null],
        );
        if (tasks.length === 0) {
          await m.query(`DELETE FROM upstream_batches WHERE id = $1`, [id]);
          return null;
        }
        await m.query(`UPDATE upstream_batches SET lines = $2 WHERE id = $1`, [id, tasks.length]);
        return { id, tasks: tasks.map((t) => ({ id: t.id, attempts: t.attempts, batchId: t.batch_id })) };
      }),
    );
    if (result) this.writes.announce(new Set(result.tasks.map((t) => t.batchId)));
    return result;
  }
}

/**
 * Economy tasks of a group whose upstream batch failed them in a way that fails over
 * (EconomyCollector): back to `pending` on another route of their batch's chain (route_index),
 * out of the group, for that route's next group. Fenced on each task's attempt and group; a
 * task of a batch cancelled meanwhile stays (the caller fails and refunds it, as before
 * failover). No request of theirs may still run: the caller moves only tasks the upstream
 * never ran (its batch failed or expired, or was never created). Answers the ids moved.
 */
export async function moveEconomyTasksToRoute(
  writes: FencedWrites,
  groupId: string,
  tasks: readonly { id: string; attempts: number }[],
  routeIndex: number,
): Promise<string[]> {
  if (tasks.length === 0) return [];
  const moved = await retryingDeadlocks(() =>
    writes.db.transaction(async (m) =>
      queryRows<{ id: string; batch_id: string }>(
        m,
        `WITH input AS (
           SELECT * FROM unnest($1::uuid[], $2::int[]) AS i(id, attempts)
         ), locked AS (
           ${lockBatchesInIdOrder('id IN (SELECT batch_id FROM tasks WHERE id = ANY($1::uuid[])) AND cancelled_at IS NULL')}
         ), moved AS (
           UPDATE tasks t SET status = 'pending', upstream_batch_id = NULL, route_index = $4, progress = 0, sent_at = NULL,
                  updated_at = now()
             FROM input i
            WHERE t.id = i.id AND t.attempts = i.attempts AND ${statusIs('t', 'running')} AND t.upstream_batch_id = $3
              AND t.batch_id IN (SELECT id FROM locked)
            RETURNING t.id, t.batch_id
         ), touched AS (
           UPDATE batches SET version = version + 1 WHERE id IN (SELECT batch_id FROM moved)
         )
         SELECT * FROM moved`,
        [tasks.map((t) => t.id), tasks.map((t) => t.attempts), groupId, routeIndex],
      ),
    ),
  );
  if (moved.length > 0) writes.announce(new Set(moved.map((t) => t.batch_id)));
  return moved.map((t) => t.id);
}
