-- args: backfill under a temporary default, then require it (it keeps no default).
ALTER TABLE /* TEMPLATE: schema */river_job ALTER COLUMN args SET DEFAULT '{}';
UPDATE /* TEMPLATE: schema */river_job SET args = '{}' WHERE args IS NULL;
ALTER TABLE /* TEMPLATE: schema */river_job ALTER COLUMN args SET NOT NULL;
ALTER TABLE /* TEMPLATE: schema */river_job ALTER COLUMN args DROP DEFAULT;

-- metadata: same backfill, but the default stays.
ALTER TABLE /* TEMPLATE: schema */river_job ALTER COLUMN metadata SET DEFAULT '{}';
UPDATE /* TEMPLATE: schema */river_job SET metadata = '{}' WHERE metadata IS NULL;
ALTER TABLE /* TEMPLATE: schema */river_job ALTER COLUMN metadata SET NOT NULL;

-- A label added here can't be used before this transaction commits; nothing below uses it.
ALTER TYPE /* TEMPLATE: schema */river_job_state ADD VALUE IF NOT EXISTS 'pending' AFTER 'discarded';

-- finalized_at must now be set exactly for the finalized states, in both directions.
ALTER TABLE /* TEMPLATE: schema */river_job DROP CONSTRAINT finalized_or_finalized_at_null;
ALTER TABLE /* TEMPLATE: schema */river_job ADD CONSTRAINT finalized_or_finalized_at_null CHECK (
    (finalized_at IS NULL AND state NOT IN ('cancelled', 'completed', 'discarded'))
    OR (finalized_at IS NOT NULL AND state IN ('cancelled', 'completed', 'discarded'))
);

-- Insert notifications move to the client, which knows when a transaction commits.
DROP TRIGGER river_notify ON /* TEMPLATE: schema */river_job;
DROP FUNCTION /* TEMPLATE: schema */river_job_notify;

CREATE TABLE /* TEMPLATE: schema */river_queue (
    name text PRIMARY KEY NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
    paused_at timestamptz,
    updated_at timestamptz NOT NULL
);

-- A single leadership row, always named 'default'.
ALTER TABLE /* TEMPLATE: schema */river_leader
    ALTER COLUMN name SET DEFAULT 'default',
    DROP CONSTRAINT name_length,
    ADD CONSTRAINT name_length CHECK (name = 'default');
