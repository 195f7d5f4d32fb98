-- The default goes in first so rows inserted while this runs can't reintroduce NULLs.
ALTER TABLE /* TEMPLATE: schema */river_job ALTER COLUMN tags SET DEFAULT '{}';
UPDATE /* TEMPLATE: schema */river_job SET tags = '{}' WHERE tags IS NULL;
ALTER TABLE /* TEMPLATE: schema */river_job ALTER COLUMN tags SET NOT NULL;
