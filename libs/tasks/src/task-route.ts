import { DataSource } from 'typeorm';
import { queryRows } from '@app/database';
import type { Fence } from './fenced-write';

/**
 * Moves a running task to another route of its batch's chain (tasks.route_index): its next
 * attempt goes there, and when it succeeds, that route made the image. Never while the task
 * has a queue upstream's request recorded: that request may still run (and bill), so the task
 * stays on its route until the upstream says it failed (UpstreamWaits.forget) or was
 * cancelled. Nor while a submit's intent is recorded without an answer (a submit in flight at
 * a crash, or one that timed out): the upstream may have taken it, and only its own route
 * can look it up or apply its onUnknownSubmit. False when the fence no longer holds or a
 * request or an intent is recorded.
 */
export async function moveTaskToRoute(db: DataSource, fence: Fence, routeIndex: number): Promise<boolean> {
  const rows = await queryRows<{ id: string }>(
    db,
    `UPDATE tasks SET route_index = $3, updated_at = now()
      WHERE id = $1 AND status = 'running' AND attempts = $2 AND upstream_request_id IS NULL
        AND submit_intent_at IS NULL
      RETURNING id`,
    [fence.taskId, fence.attempt, routeIndex],
  );
  return rows.length > 0;
}
