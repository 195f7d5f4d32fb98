-- Leases of this project's singleton services (docs/guides/workflows.md, "Who sweeps"): one
-- row per service, held by one Python client at a time whoever holds River's river_leader,
-- renewed by its holder and taken over by another client once it has expired. Times are
-- River's canonical UTC text, compared as strings.
CREATE TABLE /* TEMPLATE: schema */river_py_lease (
    name text PRIMARY KEY NOT NULL,
    holder text NOT NULL,
    held_since timestamp NOT NULL DEFAULT (datetime('now', 'subsec')),
    expires_at timestamp NOT NULL,
    CONSTRAINT name_length CHECK (length(name) > 0 AND length(name) < 128),
    CONSTRAINT holder_length CHECK (length(holder) > 0 AND length(holder) < 128)
);
