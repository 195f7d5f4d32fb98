-- Back to the version-only migration table. Rows of other lines would be lost, so their
-- presence makes this step refuse to run.
DO $rebuild$
BEGIN
    IF to_regclass('/* TEMPLATE: schema */river_migration') IS NULL THEN
        RETURN;
    END IF;

    IF EXISTS (SELECT 1 FROM /* TEMPLATE: schema */river_migration WHERE line <> 'main') THEN
        RAISE EXCEPTION 'river_migration holds rows of migration lines other than main; reverting version 005 would lose them, so it is refused';
    END IF;

    ALTER TABLE /* TEMPLATE: schema */river_migration RENAME TO river_migration_old;

    CREATE TABLE /* TEMPLATE: schema */river_migration (
        id bigserial PRIMARY KEY,
        created_at timestamptz NOT NULL DEFAULT now(),
        version bigint NOT NULL,
        CONSTRAINT version CHECK (version >= 1)
    );

    CREATE UNIQUE INDEX river_migration_version_idx
        ON /* TEMPLATE: schema */river_migration USING btree (version);

    INSERT INTO /* TEMPLATE: schema */river_migration (created_at, version)
        SELECT created_at, version FROM /* TEMPLATE: schema */river_migration_old;

    DROP TABLE /* TEMPLATE: schema */river_migration_old;
END
$rebuild$;

ALTER TABLE /* TEMPLATE: schema */river_job DROP COLUMN unique_key;

DROP TABLE /* TEMPLATE: schema */river_client_queue;
DROP TABLE /* TEMPLATE: schema */river_client;
