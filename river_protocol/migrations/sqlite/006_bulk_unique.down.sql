DROP TABLE /* TEMPLATE: schema */river_job;

CREATE TABLE /* TEMPLATE: schema */river_job (
    id integer PRIMARY KEY
);
