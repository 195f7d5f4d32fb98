-- metadata ends up nullable without a default, so a reversed v3 is not a fresh v3; River does the same.
ALTER TABLE /* TEMPLATE: schema */river_job ALTER COLUMN args DROP NOT NULL;
ALTER TABLE /* TEMPLATE: schema */river_job ALTER COLUMN metadata DROP NOT NULL;
ALTER TABLE /* TEMPLATE: schema */river_job ALTER COLUMN metadata DROP DEFAULT;

-- Enum labels can't be removed safely, so 'pending' stays.

ALTER TABLE /* TEMPLATE: schema */river_job DROP CONSTRAINT finalized_or_finalized_at_null;
ALTER TABLE /* TEMPLATE: schema */river_job ADD CONSTRAINT finalized_or_finalized_at_null CHECK (
    (state IN ('cancelled', 'completed', 'discarded') AND finalized_at IS NOT NULL)
    OR finalized_at IS NULL
);

CREATE OR REPLACE FUNCTION /* TEMPLATE: schema */river_job_notify()
    RETURNS trigger
    LANGUAGE plpgsql
AS $$
BEGIN
    -- Queue-level payloads let NOTIFY coalesce duplicates within one transaction.
    IF NEW.state = 'available' THEN
        PERFORM pg_notify('river_insert', json_build_object('queue', NEW.queue)::text);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER river_notify
    AFTER INSERT ON /* TEMPLATE: schema */river_job
    FOR EACH ROW
    EXECUTE FUNCTION /* TEMPLATE: schema */river_job_notify();

DROP TABLE /* TEMPLATE: schema */river_queue;

ALTER TABLE /* TEMPLATE: schema */river_leader
    ALTER COLUMN name DROP DEFAULT,
    DROP CONSTRAINT name_length,
    ADD CONSTRAINT name_length CHECK (char_length(name) > 0 AND char_length(name) < 128);
