package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/latch-io/latch/client"
)

func init() {
	register(&command{
		name:    "locks",
		usage:   "[--stale] [--history [--recursive] [-n N]] PATH",
		summary: "list the lock requests on PATH in queue order",
		help: `One line per request, granted ones first: "NODE MODE STATE session=S rev=R"
with STATE held (and token=T), waiting, or phantom (the holder was lost and
lock-delay keeps the lock until=TIME). Requests on paths above or below PATH
are listed by running latch locks on those paths.

With --history it lists instead who held the lock and how each hold ended,
newest first: "TIME EVENT token=T session=S identity=I" where EVENT is
granted or the end (released, canceled, session-closed, session-expired,
hold-ttl-expired, deleted by=WHO), and an end says how long it was held.
The cluster keeps a bounded window of these records (the lock_history_max
and lock_history_max_age_ms cluster settings, GET/PUT /v1/limits).`,
		minArgs: 1, maxArgs: 1,
		setup: func(fs *flag.FlagSet) runFunc {
			stale := fs.Bool("stale", false, "read from the connected member without confirming leadership")
			history := fs.Bool("history", false, "list the recorded grants and ends instead of the queue")
			recursive := fs.Bool("recursive", false, "--history: include locks below PATH")
			limit := fs.Int("n", 0, "--history: at most N records (default: all the cluster keeps)")
			return connected(func(ctx context.Context, e *env, c *client.Client, args []string) error {
				var opts []client.ReadOption
				if *stale {
					opts = append(opts, client.Stale())
				}
				if *history {
					evs, err := c.LockHistory(ctx, args[0], *recursive, *limit, opts...)
					if err != nil {
						return err
					}
					return e.emitHistory(evs)
				}
				q, err := c.LockQueue(ctx, args[0], opts...)
				if err != nil {
					return err
				}
				list := make([]map[string]any, 0, len(q))
				for _, li := range q {
					list = append(list, map[string]any{
						"node": li.Node, "path": li.Path, "mode": li.Mode.String(), "state": lockState(li),
						"session": li.Session, "rev": li.Rev, "token": li.Token,
						"hold_ttl_ms": li.HoldTTLMillis, "lock_delay_ms": li.LockDelayMillis,
					})
				}
				return e.emit(list, func(w io.Writer) {
					for _, li := range q {
						fmt.Fprintf(w, "%s %s %s session=%d rev=%d", li.Node, li.Mode, lockState(li), li.Session, li.Rev)
						switch {
						case li.Phantom:
							fmt.Fprintf(w, " until=%s", time.Unix(0, li.DelayEnd).UTC().Format(time.RFC3339Nano))
						case li.Granted:
							fmt.Fprintf(w, " token=%d", li.Token)
						}
						fmt.Fprintln(w)
					}
				})
			})
		},
	})
}

func lockState(li client.LockInfo) string {
	switch {
	case li.Phantom:
		return "phantom"
	case li.Granted:
		return "held"
	}
	return "waiting"
}
