module github.com/river-python/tests/go_peer

go 1.25.0

require (
	github.com/jackc/pgx/v5 v5.10.0
	github.com/riverqueue/river v0.43.0
	github.com/riverqueue/river/riverdriver/riverpgxv5 v0.43.0
)
