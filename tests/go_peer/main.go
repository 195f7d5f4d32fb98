// Command go_peer is the River Go side of the cross-language workflow check
// (tests/drivers/go_peer_workflow.py): a River Go client that works one kind, "go_middle" with
// args {"n": N}, in one queue, and records an output with River's RecordOutput, so that a
// Python workflow task depending on it reads it with ctx.workflow.output(...).
//
// Usage: go_peer [-queue go_peer] [-id CLIENT_ID] DATABASE_URL
//
// It prints "ready CLIENT_ID" once its client has started, then "worked JOB_ID" as each job
// starts (before it finishes, so a parent sees every execution), and stops its client when its
// standard input closes. It works only its own queue: a v0.43 Go client fails jobs of kinds it
// has no worker for, so the Python kinds stay in queues only Python clients work. Everything
// else is River's defaults, leader election included: the Go peer takes part in it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

type middleArgs struct {
	N int `json:"n"`
}

func (middleArgs) Kind() string { return "go_middle" }

// middleOutput is what the Python dependent reads: N and its square, and who made them.
type middleOutput struct {
	N        int    `json:"n"`
	Square   int    `json:"square"`
	WorkedBy string `json:"worked_by"`
}

type middleWorker struct {
	river.WorkerDefaults[middleArgs]
}

func (middleWorker) Work(ctx context.Context, job *river.Job[middleArgs]) error {
	fmt.Printf("worked %d\n", job.ID)
	if job.Args.N < 0 {
		// A negative N is the caller asking for a failure: no retries, so the Python side can
		// see a Go task's discard cancel its dependents.
		return river.JobCancel(errors.New("go_middle: n must not be negative"))
	}
	return river.RecordOutput(ctx, middleOutput{N: job.Args.N, Square: job.Args.N * job.Args.N, WorkedBy: "river-go"})
}

func run(url, queue, id string) error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer pool.Close()

	workers := river.NewWorkers()
	river.AddWorker(workers, &middleWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		ID:      id,
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues:  map[string]river.QueueConfig{queue: {MaxWorkers: 10}},
		Workers: workers,
	})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	fmt.Printf("ready %s\n", id)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes our stdin
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return client.Stop(stopCtx)
}

func main() {
	host, _ := os.Hostname()
	queue := flag.String("queue", "go_peer", "the queue to work")
	id := flag.String("id", fmt.Sprintf("go-peer-%s-%d", host, os.Getpid()), "the River client ID (river_leader.leader_id when it leads)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: go_peer [-queue QUEUE] [-id CLIENT_ID] DATABASE_URL")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *queue, *id); err != nil {
		fmt.Fprintln(os.Stderr, "go_peer:", err)
		os.Exit(1)
	}
}
