-- Bookkeeping table of the pre-line era: one row per applied version.
CREATE TABLE /* TEMPLATE: schema */river_migration (
    id bigserial PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    version bigint NOT NULL,
    CONSTRAINT version CHECK (version >= 1)
);

CREATE UNIQUE INDEX river_migration_version_idx
    ON /* TEMPLATE: schema */river_migration USING btree (version);
