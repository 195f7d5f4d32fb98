-- Flow control (docs/guides/flow-control.md): the limits of each limited queue, read and
-- locked by every limited claim, and the start times the rate limits count.
CREATE TABLE /* TEMPLATE: schema */river_py_queue_limit (
    queue text PRIMARY KEY NOT NULL,
    global_limit integer,
    local_limit integer,
    rate_allowed integer,
    rate_period_ms bigint,
    concurrency_partition jsonb NOT NULL DEFAULT '{}',
    rate_partition jsonb NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT queue_length CHECK (char_length(queue) > 0 AND char_length(queue) < 128),
    CONSTRAINT limits_positive CHECK (
        coalesce(global_limit, 1) >= 1 AND coalesce(local_limit, 1) >= 1
        AND coalesce(rate_allowed, 1) >= 1 AND coalesce(rate_period_ms, 1) >= 1),
    CONSTRAINT rate_complete CHECK ((rate_allowed IS NULL) = (rate_period_ms IS NULL))
);

CREATE TABLE /* TEMPLATE: schema */river_py_job_start (
    queue text NOT NULL,
    partition_key text NOT NULL,
    started_at timestamptz NOT NULL,
    job_id bigint NOT NULL
);

CREATE INDEX river_py_job_start_window
    ON /* TEMPLATE: schema */river_py_job_start (queue, started_at);
