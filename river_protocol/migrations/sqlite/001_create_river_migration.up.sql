-- Bookkeeping table of the pre-line era: one row per applied version.
CREATE TABLE /* TEMPLATE: schema */river_migration (
    id integer PRIMARY KEY,
    created_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
    version integer NOT NULL,
    CONSTRAINT version CHECK (version >= 1)
);

-- SQLite wants the schema on the index name; the table then resolves inside that schema.
CREATE UNIQUE INDEX /* TEMPLATE: schema */river_migration_version_idx
    ON river_migration (version);
