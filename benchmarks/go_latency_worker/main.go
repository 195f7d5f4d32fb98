// Command go_latency_worker is the River Go side of `python -m benchmarks latency`: a River Go
// client working the default queue (100 workers) with a no-op worker for the bench's jobs,
// kind "benchmark" with args {"num": N}, as Python's bench_workers() does.
//
// Usage: go_latency_worker DATABASE_URL FETCH_COOLDOWN_MS
//
// It prints "ready" once its client has started and stops its client when its standard
// input closes, the contract of the Python worker process the benchmark starts. Only the
// default queue's fetch cooldown is set: everything else is River's defaults (its batch
// completer, fetch poll interval, notifications), which is what the benchmark compares.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

type benchmarkArgs struct {
	Num int `json:"num"`
}

func (benchmarkArgs) Kind() string { return "benchmark" }

type noopWorker struct {
	river.WorkerDefaults[benchmarkArgs]
}

func (noopWorker) Work(context.Context, *river.Job[benchmarkArgs]) error { return nil }

func run(url string, cooldownMs float64) error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer pool.Close()

	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues: map[string]river.QueueConfig{river.QueueDefault: {
			MaxWorkers:    100,
			FetchCooldown: time.Duration(cooldownMs * float64(time.Millisecond)),
		}},
		Workers: workers,
	})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the benchmark closes our stdin
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return client.Stop(stopCtx)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: go_latency_worker DATABASE_URL FETCH_COOLDOWN_MS")
		os.Exit(2)
	}
	cooldown, err := strconv.ParseFloat(os.Args[2], 64)
	if err != nil || cooldown <= 0 {
		fmt.Fprintln(os.Stderr, "FETCH_COOLDOWN_MS must be a positive number of milliseconds")
		os.Exit(2)
	}
	if err := run(os.Args[1], cooldown); err != nil {
		fmt.Fprintln(os.Stderr, "go_latency_worker:", err)
		os.Exit(1)
	}
}
