package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/latch-io/latch/client"
)

func init() {
	register(&command{
		name:    "elect",
		usage:   "[--observe] PATH [VALUE]",
		summary: "campaign in the election on PATH with VALUE, or follow its leader",
		help: `Without --observe: campaigns with VALUE, prints "latch: leading PATH at term
N" on stderr once elected and holds the leadership until interrupted (then
resigns; exit status 0). Losing it (the session expired) exits with status 1.
With --observe: follows the election without campaigning. Either way every
leader change goes to stdout as one line "leader VALUE TERM", or "none"
while nobody leads.`,
		minArgs: 1, maxArgs: 2,
		setup: func(fs *flag.FlagSet) runFunc {
			observe := fs.Bool("observe", false, "only follow the leader, do not campaign")
			return func(ctx context.Context, e *env, args []string) error {
				if *observe != (len(args) == 1) {
					return fmt.Errorf("%w: give VALUE to campaign, or --observe without one", errUsage)
				}
				return elect(ctx, e, args[0], args[1:], *observe)
			}
		},
	})
}

func elect(ctx context.Context, e *env, path string, value []string, observe bool) error {
	setup, cancel := e.withTimeout(ctx)
	c, err := e.client(setup)
	cancel()
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	printed := make(chan error, 1)
	go func() { printed <- printLeaders(ctx, e, c.ObserveLeader(ctx, path)) }()
	if observe {
		<-ctx.Done()
		return <-printed
	}
	el := client.NewElection(c.Session(), path)
	if err := el.Campaign(ctx, []byte(value[0])); err != nil {
		stop()
		<-printed
		if ctx.Err() != nil {
			return nil // interrupted while campaigning
		}
		return err
	}
	fmt.Fprintf(e.stderr, "latch: leading %s at term %d\n", path, el.Term())
	var lost error
	select {
	case <-ctx.Done():
	case <-el.Lost():
		lost = fmt.Errorf("latch: leadership of %s lost: %w", path, el.Err())
	}
	rctx, rcancel := context.WithTimeout(context.Background(), e.g.timeout)
	defer rcancel()
	if lost == nil {
		if err := el.Resign(rctx); err != nil {
			lost = err
		}
	}
	stop()
	<-printed
	return lost
}

// printLeaders writes every leader change until ch closes.
func printLeaders(ctx context.Context, e *env, ch <-chan client.LeaderInfo) error {
	for li := range ch {
		v := map[string]any{"none": li.None, "leader": string(li.Value), "term": li.Term}
		err := e.emit(v, func(w io.Writer) {
			if li.None {
				fmt.Fprintln(w, "none")
			} else {
				fmt.Fprintf(w, "leader %s %d\n", li.Value, li.Term)
			}
		})
		if err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
