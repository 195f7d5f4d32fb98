-- SQLite support arrived long after version 2, so the real river_job only appears in
-- version 6. This stand-in keeps the same set of tables at every version.
CREATE TABLE /* TEMPLATE: schema */river_job (
    id integer PRIMARY KEY
);

CREATE TABLE /* TEMPLATE: schema */river_leader (
    elected_at timestamp NOT NULL,
    expires_at timestamp NOT NULL,
    leader_id text NOT NULL,
    name text PRIMARY KEY NOT NULL,
    CONSTRAINT name_length CHECK (length(name) > 0 AND length(name) < 128),
    CONSTRAINT leader_id_length CHECK (length(leader_id) > 0 AND length(leader_id) < 128)
);
