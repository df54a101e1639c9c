-- Every SQL statement that writes the tasks, batches and upstream_batches tables, read from
-- the source text of libs/tasks/src/ (libs/testing/src/sql-listing.ts). Generated: do not edit;
-- `npm run sql:listing` writes it again, and a unit test fails while it is stale.
-- ${...} are the source's interpolations, as written.

-- libs/tasks/src/batch-changes.ts: in bumpBatchVersions
UPDATE batches SET version = version + 1
WHERE id IN (SELECT id FROM batches WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE);

-- libs/tasks/src/batch-deadline.ts: in BatchDeadlines.cancelPastDeadline
UPDATE batches SET cancel_reason = 'deadline' WHERE id = $1;

-- libs/tasks/src/batch-row.ts: in insertBatchWithTasks
WITH batch AS (
  INSERT INTO batches (id, account_id, api_key_id, prompts, model, aspect_ratio, resolution, quality, background,
    count_per_combo, ref_mode, ref_images, total, note, unit_cost, credits_charged, credits_refunded, provider,
    width, height, status, created_via_api, seed, output_format, tier, created_at, expires_at, deadline, routes, failover)
  SELECT $1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, 0, $17, $18, $19, 'pending', $20,
    $21, $22, $23, at.t, at.t + make_interval(hours => $24::int), $31, $32::jsonb, $33::jsonb
    FROM (SELECT clock_timestamp()::timestamptz(3) AS t) at
  RETURNING created_at, expires_at
), task AS (
  INSERT INTO tasks (id, batch_id, account_id, seq, prompt, ref_upload_ids, seed, status, tier)
  SELECT t.id, $1, $2, t.seq, $4::jsonb ->> t.prompt_index, t.refs::uuid[], t.seed,
         CASE WHEN t.seq < $30 THEN 'queued' ELSE 'pending' END, $23
    FROM unnest($25::uuid[], $26::int[], $27::int[], $28::text[], $29::int[]) AS t(id, seq, prompt_index, refs, seed)
)
SELECT created_at, expires_at FROM batch;

-- libs/tasks/src/batch-row.ts: in clearPreviewUrls
UPDATE batches SET preview_url = NULL, version = version + 1 WHERE id = ANY($1::uuid[]);

-- libs/tasks/src/fenced-write.ts: TALLY_SQL
UPDATE batches SET ${tallyAssignments({ succeeded: '$2', failed: '$3', cancelled: '0', refunded: '$4', preview: '$5::text' })}
WHERE id = $1
RETURNING status, finished_at, preview_url;

-- libs/tasks/src/submit-intent.store.ts: kiln_submit_intent_group (RECORD_GROUP)
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::int[], $3::jsonb[]) AS i(id, attempt, intent)
), locked AS (
  ${lockBatchesInIdOrder('id = ANY($4::uuid[])')}
), marked AS (
  UPDATE tasks t SET submit_intent_at = now(), submit_intent = i.intent
    FROM input i
   WHERE t.id = i.id AND t.id = ANY($1::uuid[]) AND ${statusIs('t', 'running')} AND t.attempts = i.attempt
     AND t.upstream_request_id IS NULL AND t.batch_id IN (SELECT id FROM locked)
   RETURNING t.id, t.attempts, t.submit_intent_at
)
SELECT id, attempts, submit_intent_at::text AS stamp, set_config('synchronous_commit', 'on', true) AS durable FROM marked;

-- libs/tasks/src/submit-intent.store.ts: in SubmitIntentStore.clear
WITH cleared AS (
  UPDATE tasks SET submit_intent_at = NULL, submit_intent = NULL
   WHERE id = $1 AND status = 'running' AND attempts = $2 AND submit_intent_at IS NOT NULL
   RETURNING id
)
SELECT id, set_config('synchronous_commit', 'on', true) AS durable FROM cleared;

-- libs/tasks/src/task-cancellation.ts: in cancelUnsentTasks
UPDATE tasks SET status = 'cancelled', progress = 0, finished_at = now(), updated_at = now()
WHERE id = $2 AND batch_id = $1 AND status = 'running' AND attempts = $3 AND upstream_request_id IS NULL
  AND upstream_batch_id IS NULL
RETURNING id;

-- libs/tasks/src/task-cancellation.ts: in cancelUnsentTasks
UPDATE tasks SET status = 'cancelled', progress = 0, finished_at = now(), updated_at = now()
WHERE batch_id = $1 AND (status IN ('pending', 'queued') OR (status = 'running' AND sent_at IS NULL))
  AND upstream_request_id IS NULL AND upstream_batch_id IS NULL
RETURNING id;

-- libs/tasks/src/task-cancellation.ts: in cancelUnsentTasks
UPDATE batches SET cancelled_at = COALESCE(cancelled_at, now()),
      ${tallyAssignments({ succeeded: '0', failed: '0', cancelled: '$2', refunded: '$3', preview: 'NULL' })}
WHERE id = $1
RETURNING status, finished_at;

-- libs/tasks/src/task-cancellation.ts: in markUpstreamCancels
UPDATE tasks t SET upstream_cancel = 'asked', upstream_cancel_at = NULL, updated_at = now()
 FROM batches b
WHERE t.batch_id = $1 AND b.id = t.batch_id AND t.status IN ('pending', 'queued', 'running') AND t.upstream_request_id IS NOT NULL
  AND t.upstream_batch_id IS NULL AND t.upstream_cancel IS NULL AND COALESCE(b.routes -> t.route_index, b.provider)->>'type' = ANY($2::text[])
RETURNING t.id;

-- libs/tasks/src/task-claim.ts: in claimStatement
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::text[]) AS i(id, token)
), locked AS (
  ${lockBatchesInIdOrder(batchesOfInput)}
), overdue AS (
  ${overdueBatchesIn('locked')}
), claimed AS (
  UPDATE tasks t SET status = 'running', attempts = t.attempts + 1,
         -- A task with an upstream request stays sent: it is resumed, never sent again.
         progress = CASE WHEN t.upstream_request_id IS NULL THEN ${sending ? 1 : 0} ELSE t.progress END,
         sent_at = CASE WHEN t.upstream_request_id IS NULL THEN ${sending ? 'now()' : 'NULL'} ELSE t.sent_at END,
         upstream_poll_at = NULL, upstream_lease_until = NULL, upstream_poller = NULL,
         started_at = COALESCE(t.started_at, now()), updated_at = now(),
         result_token = COALESCE(t.result_token, i.token)
    FROM input i
   -- Found by primary key whatever the statistics say (statusIs).
   WHERE t.id = i.id AND t.id = ANY($1::uuid[]) AND ${statusIs('t', 'pending', 'queued', 'running')}
     -- Economy tasks are the collector's (upstream batches), never a job's: a stray job finds nothing.
     AND t.tier = 'standard' AND t.upstream_batch_id IS NULL
     AND t.batch_id IN (SELECT id FROM locked)
     -- Past its batch's deadline a task not yet sent is never started (the deadline sweep
     -- cancels it); one already sent (a takeover, or a queue upstream's request) runs on.
     AND (t.upstream_request_id IS NOT NULL OR (t.status = 'running' AND t.sent_at IS NOT NULL)
          OR t.batch_id NOT IN (SELECT id FROM overdue))
   RETURNING t.id, t.batch_id, t.account_id, t.seq, t.prompt, t.seed, t.ref_upload_ids, t.attempts, t.result_token,
             t.upstream_request_id, t.upstream_handle, t.upstream_submitted_at, t.route_index,
             t.submit_intent_at, t.submit_intent
), touched AS (
  UPDATE batches SET status = CASE WHEN status = 'pending' THEN 'running' ELSE status END, version = version + 1
   WHERE id IN (SELECT batch_id FROM claimed)
)
SELECT c.*, c.submit_intent_at::text AS submit_intent_stamp,
       b.id AS batch_found, b.model, b.aspect_ratio, b.resolution, b.quality, b.background, b.output_format,
       -- The task's route: its place in the batch's chain (the batch's provider when it has none).
       b.routes, b.failover, COALESCE(b.routes -> c.route_index, b.provider) AS provider,
       b.width, b.height, b.preview_url,
       COALESCE(m.supports_quality, false) AS supports_quality,
       COALESCE(m.supports_background, false) AS supports_background
  FROM claimed c
  LEFT JOIN batches b ON b.id = c.batch_id
  LEFT JOIN models m ON m.key = b.model;

-- libs/tasks/src/task-dispatch.service.ts: TAKE_PENDING_SQL
WITH next AS (
  SELECT id FROM tasks WHERE status = 'pending' AND tier = 'standard'
   ORDER BY seq, created_at, id
   LIMIT $1
   FOR UPDATE SKIP LOCKED
)
UPDATE tasks t SET status = 'queued', updated_at = now()
  FROM next WHERE t.id = next.id
RETURNING t.id, t.batch_id, t.seq, t.created_at;

-- libs/tasks/src/task-dispatch.service.ts: in TaskDispatchService.backToPending
UPDATE tasks t SET status = 'pending', updated_at = now() WHERE t.id = ANY($1::uuid[]) AND ${statusIs('t', 'queued')} RETURNING t.batch_id;

-- libs/tasks/src/task-economy-expiry.ts: in TaskEconomyExpiry.expireBatch
UPDATE tasks t SET status = 'failed', error = $2, error_code = 'upstream_unavailable', finished_at = now(), updated_at = now()
WHERE batch_id = $1 AND tier = 'economy' AND status IN ('pending', 'queued', 'running')
RETURNING t.id, t.batch_id, ${ENDED_TASK_COLUMNS};

-- libs/tasks/src/task-economy-submit.ts: in TaskEconomySubmits.formGroup
INSERT INTO upstream_batches (model, provider, lines, state, poller, lease_until)
VALUES ($1, $2::jsonb, 0, 'collecting', $3, now() + $4::int * interval '1 millisecond') RETURNING id;

-- libs/tasks/src/task-economy-submit.ts: in TaskEconomySubmits.formGroup
WITH input AS (
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
SELECT * FROM taken;

-- libs/tasks/src/task-economy-submit.ts: in TaskEconomySubmits.formGroup
DELETE FROM upstream_batches WHERE id = $1;

-- libs/tasks/src/task-economy-submit.ts: in TaskEconomySubmits.formGroup
UPDATE upstream_batches SET lines = $2 WHERE id = $1;

-- libs/tasks/src/task-economy-submit.ts: in moveEconomyTasksToRoute
WITH input AS (
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
SELECT * FROM moved;

-- libs/tasks/src/task-fail-and-refund.ts: FAIL_GROUP_SQL
UPDATE tasks t SET status = 'failed', error = i.message, error_code = i.code, finished_at = now(), updated_at = now()
  FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[]) AS i(id, attempt, message, code)
 -- t.id = ANY($1) as well as the join, and statusIs: the rows are found by primary key.
 WHERE t.id = i.id AND t.id = ANY($1::uuid[]) AND ${statusIs('t', 'running')} AND t.attempts = i.attempt
   AND t.batch_id = ANY($5::uuid[])
RETURNING t.id, t.attempts, t.batch_id, ${ENDED_TASK_COLUMNS};

-- libs/tasks/src/task-fail-and-refund.ts: TALLY_FAILED_SQL
UPDATE batches SET ${tallyAssignments({ succeeded: '0', failed: 'c.failed', cancelled: '0', refunded: 'c.credited', preview: 'NULL::text' })}
  FROM unnest($1::uuid[], $2::int[], $3::int[]) AS c(batch_id, failed, credited)
 WHERE batches.id = c.batch_id
RETURNING batches.id, batches.status, batches.finished_at, batches.preview_url;

-- libs/tasks/src/task-fail-and-refund.ts: in TaskFailures.fail
UPDATE tasks t SET status = 'failed', error = $3, error_code = $4, finished_at = now(), updated_at = now(),
      upstream_cost_micros = t.upstream_cost_micros + $5
WHERE id = $1 AND status = 'running' AND attempts = $2
RETURNING t.id, t.batch_id, ${ENDED_TASK_COLUMNS};

-- libs/tasks/src/task-requeue.ts: in TaskRequeues.requeue
UPDATE tasks SET status = 'queued', progress = 0, sent_at = NULL, updated_at = now()
WHERE id = $1 AND status = 'running' AND attempts = $2
RETURNING id;

-- libs/tasks/src/task-requeue.ts: in TaskRequeues.requeue
UPDATE batches SET version = version + 1 WHERE id = $1;

-- libs/tasks/src/task-requeue.ts: in TaskRequeues.finishFromTasks
UPDATE batches SET succeeded_count = $2, failed_count = $3, cancelled_count = $4, credits_refunded = $5, status = $6,
      finished_at = now(), version = version + 1
WHERE id = $1;

-- libs/tasks/src/task-route.ts: in moveTaskToRoute
UPDATE tasks SET route_index = $3, updated_at = now()
WHERE id = $1 AND status = 'running' AND attempts = $2 AND upstream_request_id IS NULL
  AND submit_intent_at IS NULL
RETURNING id;

-- libs/tasks/src/task-rows.ts: in clearResultKeys
UPDATE tasks SET result_key = NULL WHERE id = ANY($1::uuid[]);

-- libs/tasks/src/task-send.ts: kiln_send_group (SEND_GROUP)
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::int[]) AS i(id, attempt)
), locked AS (
  ${lockBatchesInIdOrder('id = ANY($3::uuid[])')}
), overdue AS (
  ${overdueBatchesIn('locked')}
), sent AS (
  UPDATE tasks t SET sent_at = now(), progress = GREATEST(t.progress, 1), updated_at = now()
    FROM input i
   WHERE t.id = i.id AND t.id = ANY($1::uuid[]) AND ${statusIs('t', 'running')} AND t.attempts = i.attempt AND t.sent_at IS NULL
     AND t.batch_id IN (SELECT id FROM locked) AND t.batch_id NOT IN (SELECT id FROM overdue)
   RETURNING t.id, t.attempts, t.batch_id
), bumped AS (
  UPDATE batches SET version = version + 1 WHERE id IN (SELECT batch_id FROM sent)
)
SELECT id, attempts, batch_id FROM sent;

-- libs/tasks/src/task-send.ts: kiln_progress_group (PROGRESS_GROUP)
WITH locked AS (
  ${lockBatchesInIdOrder('id = ANY($4::uuid[])')}
), moved AS (
  UPDATE tasks t SET progress = i.pct, updated_at = now()
    FROM unnest($1::uuid[], $2::int[], $3::int[]) AS i(id, attempt, pct)
   WHERE t.id = i.id AND t.id = ANY($1::uuid[]) AND ${statusIs('t', 'running')} AND t.attempts = i.attempt AND t.progress < i.pct
     AND t.batch_id IN (SELECT id FROM locked)
   RETURNING t.batch_id
), bumped AS (
  UPDATE batches SET version = version + 1 WHERE id IN (SELECT batch_id FROM moved)
)
SELECT DISTINCT batch_id FROM moved;

-- libs/tasks/src/task-success.ts: kiln_succeed_group (SUCCEED_GROUP)
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::text[], $7::int[], $8::int[], $9::bigint[])
    AS i(id, attempt, result_url, result_key, preview_url, width, height, cost_micros)
), locked AS (
  ${lockBatchesInIdOrder('id = ANY($6::uuid[])')}
), done AS (
  UPDATE tasks t SET status = 'succeeded', progress = 100, result_url = i.result_url, result_key = i.result_key,
         result_width = i.width, result_height = i.height, error = NULL, error_code = NULL,
         upstream_cost_micros = t.upstream_cost_micros + i.cost_micros, -- unpriced (NULL) stays unpriced
         finished_at = now(), updated_at = now()
    FROM input i
   -- t.id = ANY($1) as well as the join, and statusIs: the group's rows are found by primary
   -- key, not by scanning the running tasks (an economy batch has thousands running).
   WHERE t.id = i.id AND t.id = ANY($1::uuid[]) AND ${statusIs('t', 'running')} AND t.attempts = i.attempt
     AND t.batch_id IN (SELECT id FROM locked)
   RETURNING t.id, t.attempts, t.batch_id, i.preview_url, ${ENDED_TASK_COLUMNS}
), counted AS (
  SELECT batch_id, count(*)::int AS n, min(preview_url) AS new_preview FROM done GROUP BY batch_id
), tallied AS (
  UPDATE batches SET ${tallyAssignments({ succeeded: 'counted.n', failed: '0', cancelled: '0', refunded: '0', preview: 'counted.new_preview' })}
    FROM counted
   WHERE batches.id = counted.batch_id
  RETURNING batches.id, batches.status, batches.finished_at, batches.preview_url
)
SELECT done.*, tallied.status AS batch_status, tallied.finished_at, tallied.preview_url AS batch_preview_url
  FROM done JOIN tallied ON tallied.id = done.batch_id;

-- libs/tasks/src/upstream-batch.store.ts: in UpstreamBatchStore.leaseDue
WITH due AS (
  SELECT id FROM upstream_batches
   WHERE state NOT IN ('read', 'failed') AND poll_at <= now() AND (lease_until IS NULL OR lease_until < now())
   ORDER BY poll_at LIMIT $3 FOR UPDATE SKIP LOCKED
)
UPDATE upstream_batches u SET poller = $1, lease_until = now() + $2::int * interval '1 millisecond', updated_at = now()
  FROM due WHERE u.id = due.id
RETURNING ${GROUP_COLUMNS.split(', ')
  .map((c) => `u.${c}`)
  .join(', ')};

-- libs/tasks/src/upstream-batch.store.ts: in UpstreamBatchStore.releaseAll
UPDATE upstream_batches SET poller = NULL, lease_until = NULL WHERE poller = $1 RETURNING id;

-- libs/tasks/src/upstream-batch.store.ts: in UpstreamBatchStore.fenced
UPDATE upstream_batches SET ${set}, updated_at = now() WHERE id = $1 AND poller = $2 AND ${where} RETURNING id;

-- libs/tasks/src/upstream-cancel.store.ts: in UpstreamCancelStore.take
WITH due AS (
  SELECT id FROM tasks
   WHERE upstream_cancel IN ('asked', 'sending') AND (upstream_cancel_at IS NULL OR upstream_cancel_at <= now())
     AND status = 'running'
   ORDER BY upstream_cancel_at NULLS FIRST LIMIT $2 FOR UPDATE SKIP LOCKED
), taken AS (
  UPDATE tasks t SET upstream_cancel = 'sending', upstream_cancel_at = now() + $1::int * interval '1 millisecond'
   WHERE t.id IN (SELECT id FROM due)
   RETURNING t.id, t.batch_id, t.upstream_request_id, t.upstream_handle, t.route_index
)
-- The route the request was sent on: the task's place in its batch's chain.
SELECT taken.*, COALESCE(b.routes -> taken.route_index, b.provider) AS provider, b.model
  FROM taken JOIN batches b ON b.id = taken.batch_id;

-- libs/tasks/src/upstream-cancel.store.ts: in UpstreamCancelStore.confirmed
UPDATE tasks SET status = 'cancelled', upstream_cancel = 'confirmed', upstream_cancel_at = NULL,
      upstream_poll_at = NULL, upstream_poller = NULL, upstream_lease_until = NULL,
      progress = 0, finished_at = now(), updated_at = now()
WHERE id = $1 AND batch_id = $2 AND status = 'running' AND upstream_request_id = $3 AND upstream_cancel = 'sending'
RETURNING id;

-- libs/tasks/src/upstream-cancel.store.ts: in UpstreamCancelStore.confirmed
UPDATE batches SET ${tallyAssignments({ succeeded: '0', failed: '0', cancelled: '1', refunded: '$2', preview: 'NULL' })}
WHERE id = $1
RETURNING finished_at;

-- libs/tasks/src/upstream-cancel.store.ts: in UpstreamCancelStore.settle
UPDATE tasks SET ${assignments}, updated_at = now()
WHERE id = $1 AND batch_id = $2 AND upstream_request_id = $3 AND upstream_cancel = 'sending'
RETURNING id;

-- libs/tasks/src/upstream-cancel.store.ts: in UpstreamCancelStore.settle
UPDATE batches SET version = version + 1 WHERE id = $1;

-- libs/tasks/src/upstream-wait.store.ts: kiln_upstream_record_group_v3 (RECORD_GROUP_SQL)
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::jsonb[], $6::text[], $7::timestamptz[], $8::int[])
    AS i(id, attempt, request_id, handle, poller, poll_at, lease_ms)
), locked AS (
  ${lockedForRecord('id = ANY($5::uuid[])', '$9')}
), recorded AS (
  UPDATE tasks t SET ${recordedColumns({
    requestId: 'i.request_id',
    handle: 'i.handle',
    pollAt: 'i.poll_at',
    poller: 'i.poller',
    leaseUntil: "CASE WHEN i.poller IS NULL THEN NULL ELSE now() + i.lease_ms * interval '1 millisecond' END",
  })}
    FROM input i
   -- Found by primary key whatever the statistics say (statusIs).
   WHERE t.id = i.id AND t.id = ANY($1::uuid[]) AND ${statusIs('t', 'running')} AND t.attempts = i.attempt
     AND t.batch_id IN (SELECT id FROM locked)
   RETURNING t.id, t.attempts, t.batch_id, t.upstream_cancel
), bumped AS (
  UPDATE batches SET version = version + 1 WHERE id IN (SELECT batch_id FROM recorded)
)
-- Evaluated for every task recorded, so whenever one is: see RECORD_GROUP.
SELECT id, attempts, batch_id, upstream_cancel, set_config('synchronous_commit', 'on', true) AS durable FROM recorded;

-- libs/tasks/src/upstream-wait.store.ts: HAND_OFF_SQL
WITH locked AS (
  ${lockedForRecord('id = $2', '$6')}
), handed AS (
  UPDATE tasks t SET ${recordedColumns({ requestId: '$3', handle: '$4::jsonb', pollAt: '$7', poller: 'NULL', leaseUntil: 'NULL' })}
   WHERE t.id = $1 AND t.status = 'running' AND t.upstream_request_id IS NULL AND t.submit_intent_at = $5::timestamptz
     AND t.batch_id IN (SELECT id FROM locked)
   RETURNING t.id, t.attempts, t.batch_id, t.upstream_cancel
), bumped AS (
  UPDATE batches SET version = version + 1 WHERE id IN (SELECT batch_id FROM handed)
)
SELECT id, attempts, batch_id, upstream_cancel, set_config('synchronous_commit', 'on', true) AS durable FROM handed;

-- libs/tasks/src/upstream-wait.store.ts: in UpstreamWaitStore.resume
UPDATE tasks SET upstream_poll_at = $3, upstream_poller = $4,
      upstream_lease_until = CASE WHEN $4::text IS NULL THEN NULL ELSE now() + $5::int * interval '1 millisecond' END,
      sent_at = COALESCE(sent_at, now()), updated_at = now()
WHERE id = $1 AND status = 'running' AND attempts = $2 AND upstream_request_id IS NOT NULL
RETURNING id;

-- libs/tasks/src/upstream-wait.store.ts: in UpstreamWaitStore.forget
UPDATE tasks SET upstream_request_id = NULL, upstream_handle = NULL, upstream_submitted_at = NULL,
      submit_intent_at = NULL, submit_intent = NULL,
      upstream_poll_at = NULL, upstream_poller = NULL, upstream_lease_until = NULL, updated_at = now(),
      route_index = COALESCE($3::int, route_index)
WHERE id = $1 AND status = 'running' AND attempts = $2
RETURNING id;

-- libs/tasks/src/upstream-wait.store.ts: in UpstreamWaitStore.lease
WITH free AS (
  SELECT id FROM tasks
   WHERE status = 'running' AND upstream_poll_at IS NOT NULL
     AND (upstream_lease_until IS NULL OR upstream_lease_until < now())
   ORDER BY upstream_poll_at LIMIT $3 FOR UPDATE SKIP LOCKED
), taken AS (
  UPDATE tasks t SET upstream_poller = $1, upstream_lease_until = now() + $2::int * interval '1 millisecond'
   WHERE t.id IN (SELECT id FROM free)
   RETURNING t.*
)
SELECT ${WAITING_COLUMNS}
  FROM taken t
  LEFT JOIN batches b ON b.id = t.batch_id
  LEFT JOIN models m ON m.key = b.model;

-- libs/tasks/src/upstream-wait.store.ts: in UpstreamWaitStore.renew
WITH mine AS (
  SELECT id FROM tasks
   WHERE id = ANY($3::uuid[]) AND upstream_poller = $1 AND status = 'running' AND upstream_poll_at IS NOT NULL
   ORDER BY id FOR UPDATE SKIP LOCKED
)
UPDATE tasks t SET upstream_lease_until = now() + $2::int * interval '1 millisecond'
 WHERE t.id IN (SELECT id FROM mine)
 RETURNING t.id, t.attempts;

-- libs/tasks/src/upstream-wait.store.ts: in UpstreamWaitStore.release
UPDATE tasks SET upstream_poller = NULL, upstream_lease_until = NULL, upstream_poll_at = GREATEST(upstream_poll_at, $2)
WHERE upstream_poller = $1 AND status = 'running' AND upstream_poll_at IS NOT NULL
RETURNING id;
