DROP TABLE /* TEMPLATE: schema */river_py_job_start;
DROP TABLE /* TEMPLATE: schema */river_py_queue_limit;
