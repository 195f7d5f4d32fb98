DROP TABLE /* TEMPLATE: schema */river_py_lease;
