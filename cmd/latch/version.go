package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/adminapi"
)

func init() {
	register(&command{
		name:    "version",
		usage:   "[--members]",
		summary: "print the version and build of latch (and, with --members, of every member's latchd)",
		maxArgs: 0,
		setup: func(fs *flag.FlagSet) runFunc {
			members := fs.Bool("members", false, "also ask every member of the cluster for its version")
			memberTimeout := fs.Duration("member-timeout", time.Second, "how long each member has to answer")
			return func(ctx context.Context, e *env, _ []string) error {
				build := adminapi.ThisBuild()
				type doc struct {
					Latch   adminapi.Build `json:"latch"`
					Members []health       `json:"members,omitempty"`
				}
				v := doc{Latch: build}
				if *members {
					err := connected(func(ctx context.Context, e *env, c *client.Client, _ []string) error {
						ms, err := c.Members(ctx)
						if err != nil {
							return err
						}
						v.Members = memberHealth(ctx, c, ms, *memberTimeout)
						return nil
					})(ctx, e, nil)
					if err != nil {
						return err
					}
				}
				return e.emit(v, func(w io.Writer) {
					fmt.Fprintf(w, "latch %s\n", build)
					if v.Members == nil {
						return
					}
					tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "\nMEMBER\tVERSION\t")
					for _, h := range v.Members {
						ver := h.Version
						if h.Health != "ok" {
							ver = h.Health
						}
						fmt.Fprintf(tw, "%s\t%s\t\n", h.ID, ver)
					}
					tw.Flush()
				})
			}
		},
	})
}
