-- The outbox serves SQLite, which has no LISTEN/NOTIFY; Postgres gets the table for parity only.
CREATE TABLE /* TEMPLATE: schema */river_notification (
    id bigserial PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    payload text NOT NULL,
    topic text NOT NULL,
    CONSTRAINT topic_length CHECK (length(topic) > 0 AND length(topic) < 128)
);

CREATE INDEX river_notification_created_at_idx
    ON /* TEMPLATE: schema */river_notification (created_at);
CREATE INDEX river_notification_topic_id_idx
    ON /* TEMPLATE: schema */river_notification (topic, id);

-- Postgres already stores JSON as jsonb: the SQLite JSONB conversion has nothing to do here.

DROP TABLE /* TEMPLATE: schema */river_client_queue;
DROP TABLE /* TEMPLATE: schema */river_client;

ALTER TABLE /* TEMPLATE: schema */river_job ALTER COLUMN max_attempts SET DEFAULT 25;

ALTER TABLE /* TEMPLATE: schema */river_queue ALTER COLUMN updated_at SET DEFAULT CURRENT_TIMESTAMP;
