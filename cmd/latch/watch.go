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
		name:    "watch",
		usage:   "[--recursive] [--children] [--locks] [--from-revision R] PATH",
		summary: "print a node's changes, one event per line, until interrupted",
		help: `Each line is "TYPE PATH REVISION" (created, deleted, data-changed,
children-changed; resync when events were lost and the state must be
re-read). By default the node's creation, data changes and deletion are
reported. With --locks, the lock events of the requests on PATH (below it
too with --recursive) are reported too: lock-granted, lock-released,
lock-lost, lock-contended, with "session=S token=T" after the revision
(PATH is the request node), "cause=C" for an end and "waiter=NODE
waiter-session=S" for a conflicting request. A line "latch: watching PATH after revision R" on stderr says the
watch is established. Stop it with Ctrl-C (exit status 0).`,
		minArgs: 1, maxArgs: 1,
		setup: func(fs *flag.FlagSet) runFunc {
			recursive := fs.Bool("recursive", false, "report every change anywhere in the subtree")
			children := fs.Bool("children", false, "report children created and deleted (instead of the node's own changes)")
			fromRev := fs.Uint64("from-revision", 0, "first report the committed changes after revision R")
			locks := fs.Bool("locks", false, "also report the lock events of the requests on PATH")
			return func(ctx context.Context, e *env, args []string) error {
				var opts []client.WatchOption
				if *recursive {
					opts = append(opts, client.Recursive())
				}
				if *children {
					opts = append(opts, client.Children())
				}
				if *locks {
					opts = append(opts, client.Locks())
				}
				if *fromRev > 0 {
					opts = append(opts, client.FromRevision(*fromRev))
				}
				w, err := startWatch(ctx, e, args[0], opts)
				if err != nil {
					return err
				}
				defer w.Close()
				fmt.Fprintf(e.stderr, "latch: watching %s after revision %d\n", args[0], w.StartRevision())
				for ev := range w.Events() {
					v := map[string]any{"type": ev.Type.String(), "path": ev.Path, "revision": ev.Revision}
					lock := ev.Type.IsLock()
					if lock {
						v["session_id"], v["token"], v["mode"] = ev.Session, ev.Token, ev.Mode.String()
						if ev.Cause != "" {
							v["cause"] = ev.Cause
						}
						if ev.Waiter != "" {
							v["waiter"], v["waiter_session_id"] = ev.Waiter, ev.WaiterSession
						}
					}
					if err := e.emit(v, func(w io.Writer) {
						fmt.Fprintf(w, "%s %s %d", ev.Type, ev.Path, ev.Revision)
						if lock {
							fmt.Fprintf(w, " session=%d token=%d", ev.Session, ev.Token)
							if ev.Cause != "" {
								fmt.Fprintf(w, " cause=%s", ev.Cause)
							}
							if ev.Waiter != "" {
								fmt.Fprintf(w, " waiter=%s waiter-session=%d", ev.Waiter, ev.WaiterSession)
							}
						}
						fmt.Fprintln(w)
					}); err != nil {
						return err
					}
				}
				if err := w.Err(); err != nil && !errors.Is(err, context.Canceled) {
					return err
				}
				return nil // interrupted
			}
		},
	})
}

// startWatch connects and registers the watch within --timeout; the watch
// itself lasts until ctx (the signal context) ends.
func startWatch(ctx context.Context, e *env, path string, opts []client.WatchOption) (*client.Watcher, error) {
	setup, cancel := e.withTimeout(ctx)
	defer cancel()
	c, err := e.client(setup)
	if err != nil {
		return nil, err
	}
	// The watch's own context must outlive the setup timeout; it ends
	// with ctx, but establishing it must not wait past the timeout.
	type result struct {
		w   *client.Watcher
		err error
	}
	done := make(chan result, 1)
	wctx, stop := context.WithCancel(ctx)
	go func() {
		w, err := c.Watch(wctx, path, opts...)
		done <- result{w, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			stop()
			return nil, r.err
		}
		context.AfterFunc(ctx, stop)
		return r.w, nil
	case <-setup.Done():
		stop()
		r := <-done
		if r.w != nil {
			r.w.Close()
		}
		return nil, fmt.Errorf("latch: watch %s: %w", path, setup.Err())
	}
}
