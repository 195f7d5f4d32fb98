DROP TABLE /* TEMPLATE: schema */river_job;
DROP TABLE /* TEMPLATE: schema */river_leader;
