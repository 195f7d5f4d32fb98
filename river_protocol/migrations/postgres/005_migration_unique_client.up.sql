-- Rebuild river_migration keyed by (line, version). Skipped when the table is absent, which
-- happens when someone runs these scripts from their own migration tool without version 1.
DO $rebuild$
BEGIN
    IF to_regclass('/* TEMPLATE: schema */river_migration') IS NULL THEN
        RETURN;
    END IF;

    -- The old table keeps its index names until it is dropped, so the new primary key is
    -- named river_migration_pkey1; River's schema carries that name too.
    ALTER TABLE /* TEMPLATE: schema */river_migration RENAME TO river_migration_old;

    CREATE TABLE /* TEMPLATE: schema */river_migration (
        line text NOT NULL,
        version bigint NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT line_length CHECK (char_length(line) > 0 AND char_length(line) < 128),
        CONSTRAINT version_gte_1 CHECK (version >= 1),
        PRIMARY KEY (line, version)
    );

    INSERT INTO /* TEMPLATE: schema */river_migration (created_at, line, version)
        SELECT created_at, 'main', version FROM /* TEMPLATE: schema */river_migration_old;

    DROP TABLE /* TEMPLATE: schema */river_migration_old;
END
$rebuild$;

-- IF NOT EXISTS lets operators of large tables build these concurrently beforehand.
ALTER TABLE /* TEMPLATE: schema */river_job ADD COLUMN IF NOT EXISTS unique_key bytea;

CREATE UNIQUE INDEX IF NOT EXISTS river_job_kind_unique_key_idx
    ON /* TEMPLATE: schema */river_job (kind, unique_key)
    WHERE unique_key IS NOT NULL;

-- Client tables reserved for a feature that never shipped; version 7 drops them again.
CREATE UNLOGGED TABLE /* TEMPLATE: schema */river_client (
    id text PRIMARY KEY NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    metadata jsonb NOT NULL DEFAULT '{}',
    paused_at timestamptz,
    updated_at timestamptz NOT NULL,
    CONSTRAINT name_length CHECK (char_length(id) > 0 AND char_length(id) < 128)
);

CREATE UNLOGGED TABLE /* TEMPLATE: schema */river_client_queue (
    river_client_id text NOT NULL
        REFERENCES /* TEMPLATE: schema */river_client (id) ON DELETE CASCADE,
    name text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    max_workers bigint NOT NULL DEFAULT 0,
    metadata jsonb NOT NULL DEFAULT '{}',
    num_jobs_completed bigint NOT NULL DEFAULT 0,
    num_jobs_running bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (river_client_id, name),
    CONSTRAINT name_length CHECK (char_length(name) > 0 AND char_length(name) < 128),
    CONSTRAINT num_jobs_completed_zero_or_positive CHECK (num_jobs_completed >= 0),
    CONSTRAINT num_jobs_running_zero_or_positive CHECK (num_jobs_running >= 0)
);
