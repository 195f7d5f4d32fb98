DROP TABLE /* TEMPLATE: schema */river_migration;
