-- The dashboard's batch search at 100,000 batches (docs/dashboard.md#batch-filters-and-search):
-- the insert cost the two trigram indexes add, and the search's plan and time.
-- Run: bash bench/search/batch-search.sh (a scratch database, dropped after).
-- The table holds the columns the search reads, with the migration's indexes
-- (1763888400370); 100,000 batches of one account, 4 prompts of ~60 characters each.
\timing on
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE TABLE batches (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(), account_id uuid NOT NULL, status text NOT NULL, model text NOT NULL,
  note text, prompts jsonb NOT NULL, created_at timestamptz NOT NULL
);
CREATE INDEX ON batches (account_id, created_at, id);
CREATE INDEX ON batches (account_id, status, created_at, id);
CREATE INDEX ON batches (account_id, model, created_at, id);
CREATE TEMP TABLE src AS
  SELECT 'a0000000-0000-4000-8000-000000000001'::uuid AS account_id,
         (ARRAY['succeeded','failed','partial','running'])[1 + i % 4] AS status,
         (ARRAY['eta-image','gamma-5-flash','beta-2'])[1 + i % 3] AS model,
         CASE WHEN i % 3 = 0 THEN NULL ELSE 'note ' || md5(i::text) END AS note,
         jsonb_build_array(
           'a ' || md5((i * 7)::text) || ' fox in the snow at dusk',
           'lighthouse ' || md5((i * 11)::text) || ' on a cliff',
           'portrait of ' || md5((i * 13)::text),
           'still life ' || md5((i * 17)::text) || ' with pears') AS prompts,
         now() - make_interval(secs => i * 30) AS created_at
    FROM generate_series(1, 100000) i;
\echo 'insert 100,000 batches, without the trigram indexes:'
INSERT INTO batches (account_id, status, model, note, prompts, created_at) SELECT * FROM src;
TRUNCATE batches;
CREATE INDEX batches_note_trgm_idx ON batches USING gin (lower(note) gin_trgm_ops);
CREATE INDEX batches_prompts_trgm_idx ON batches USING gin (lower(prompts::text) gin_trgm_ops);
\echo 'insert 100,000 batches, with the trigram indexes:'
INSERT INTO batches (account_id, status, model, note, prompts, created_at) SELECT * FROM src;
\echo 'one batch at a time, 1,000 of them, with the trigram indexes (each its own statement):'
DO $$ BEGIN FOR i IN 1..1000 LOOP
  INSERT INTO batches (account_id, status, model, note, prompts, created_at)
    SELECT account_id, status, model, note, prompts, now() FROM src OFFSET i LIMIT 1;
END LOOP; END $$;
VACUUM ANALYZE batches;
\echo 'search: a rare string (one batch has it), first page of 21:'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT id FROM batches
  WHERE account_id = 'a0000000-0000-4000-8000-000000000001'
    AND (lower(note) LIKE lower('%' || md5('77') || '%') OR lower(prompts::text) LIKE lower('%' || md5('77') || '%'))
  ORDER BY created_at DESC, id DESC LIMIT 21;
\echo 'search: a common word (every batch has it), first page of 21:'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT id FROM batches
  WHERE account_id = 'a0000000-0000-4000-8000-000000000001'
    AND (lower(note) LIKE '%lighthouse%' OR lower(prompts::text) LIKE '%lighthouse%')
  ORDER BY created_at DESC, id DESC LIMIT 21;
\echo 'search: a prefix of 3 characters, with status and model:'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT id FROM batches
  WHERE account_id = 'a0000000-0000-4000-8000-000000000001' AND status IN ('failed') AND model = 'beta-2'
    AND (lower(note) LIKE '%abc%' OR lower(prompts::text) LIKE '%abc%')
  ORDER BY created_at DESC, id DESC LIMIT 21;
SELECT pg_size_pretty(pg_relation_size('batches_note_trgm_idx')) AS note_trgm, pg_size_pretty(pg_relation_size('batches_prompts_trgm_idx')) AS prompts_trgm,
       pg_size_pretty(pg_relation_size('batches')) AS heap;
