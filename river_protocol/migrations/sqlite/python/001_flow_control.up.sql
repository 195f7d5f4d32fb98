-- Flow control (docs/guides/flow-control.md): the limits of each limited queue, read by
-- every limited claim, and the start times the rate limits count. Times are River's
-- canonical UTC text, compared as strings.
CREATE TABLE /* TEMPLATE: schema */river_py_queue_limit (
    queue text PRIMARY KEY NOT NULL,
    global_limit integer,
    local_limit integer,
    rate_allowed integer,
    rate_period_ms integer,
    concurrency_partition blob NOT NULL DEFAULT (jsonb('{}')),
    rate_partition blob NOT NULL DEFAULT (jsonb('{}')),
    updated_at timestamp NOT NULL DEFAULT (datetime('now', 'subsec')),
    CONSTRAINT queue_length CHECK (length(queue) > 0 AND length(queue) < 128),
    CONSTRAINT limits_positive CHECK (
        coalesce(global_limit, 1) >= 1 AND coalesce(local_limit, 1) >= 1
        AND coalesce(rate_allowed, 1) >= 1 AND coalesce(rate_period_ms, 1) >= 1),
    CONSTRAINT rate_complete CHECK ((rate_allowed IS NULL) = (rate_period_ms IS NULL))
);

CREATE TABLE /* TEMPLATE: schema */river_py_job_start (
    queue text NOT NULL,
    partition_key text NOT NULL,
    started_at timestamp NOT NULL,
    job_id integer NOT NULL
);

CREATE INDEX /* TEMPLATE: schema */river_py_job_start_window
    ON river_py_job_start (queue, started_at);
