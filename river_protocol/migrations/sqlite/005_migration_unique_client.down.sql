-- Rows of other migration lines would be lost by going back to the version-only table.
-- SQLite has no RAISE outside triggers, so a named CHECK on a scratch table refuses them.
CREATE TEMP TABLE river_migration_down_005_guard (
    line text CONSTRAINT version_005_irreversible_with_non_main_migration_lines CHECK (line = 'main')
);

INSERT INTO river_migration_down_005_guard (line)
    SELECT line FROM /* TEMPLATE: schema */river_migration WHERE line <> 'main';

DROP TABLE temp.river_migration_down_005_guard;

ALTER TABLE /* TEMPLATE: schema */river_migration RENAME TO river_migration_old;

CREATE TABLE /* TEMPLATE: schema */river_migration (
    id integer PRIMARY KEY,
    created_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
    version integer NOT NULL,
    CONSTRAINT version CHECK (version >= 1)
);

CREATE UNIQUE INDEX /* TEMPLATE: schema */river_migration_version_idx
    ON river_migration (version);

INSERT INTO /* TEMPLATE: schema */river_migration (created_at, version)
    SELECT created_at, version FROM /* TEMPLATE: schema */river_migration_old;

DROP TABLE /* TEMPLATE: schema */river_migration_old;

DROP TABLE /* TEMPLATE: schema */river_client_queue;
DROP TABLE /* TEMPLATE: schema */river_client;
