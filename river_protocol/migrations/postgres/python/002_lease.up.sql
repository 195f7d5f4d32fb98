-- Leases of this project's singleton services (docs/guides/workflows.md, "Who sweeps"): one
-- row per service, held by one Python client at a time whoever holds River's river_leader,
-- renewed by its holder and taken over by another client once it has expired.
CREATE TABLE /* TEMPLATE: schema */river_py_lease (
    name text PRIMARY KEY NOT NULL,
    holder text NOT NULL,
    held_since timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    CONSTRAINT name_length CHECK (char_length(name) > 0 AND char_length(name) < 128),
    CONSTRAINT holder_length CHECK (char_length(holder) > 0 AND char_length(holder) < 128)
);
