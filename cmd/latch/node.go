package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/latch-io/latch/client"
)

func init() {
	register(&command{
		name:    "create",
		usage:   "[--ephemeral] [--sequential] PATH [DATA]",
		summary: "create a node and print its path",
		help: `An --ephemeral node belongs to this command's session: it is deleted when
the command exits. --sequential appends a 10-digit sequence number to the
last path component; the path printed is the one created.`,
		minArgs: 1, maxArgs: 2,
		setup: func(fs *flag.FlagSet) runFunc {
			ephemeral := fs.Bool("ephemeral", false, "delete the node when this command's session ends")
			sequential := fs.Bool("sequential", false, "append the parent's sequence number (%010d) to the name")
			return connected(func(ctx context.Context, e *env, c *client.Client, args []string) error {
				var opts []client.CreateOption
				if *ephemeral {
					opts = append(opts, client.Ephemeral())
				}
				if *sequential {
					opts = append(opts, client.Sequential())
				}
				p, err := c.Create(ctx, args[0], []byte(arg(args, 1)), opts...)
				if err != nil {
					return err
				}
				return e.emit(map[string]string{"path": p}, func(w io.Writer) { fmt.Fprintln(w, p) })
			})
		},
	})

	register(&command{
		name:    "get",
		usage:   "[--stale] PATH",
		summary: "print a node's data",
		minArgs: 1, maxArgs: 1,
		setup: func(fs *flag.FlagSet) runFunc {
			stale := fs.Bool("stale", false, "let the member asked (the first --endpoints that answers) answer from its local state (may miss recent writes)")
			return connected(func(ctx context.Context, e *env, c *client.Client, args []string) error {
				data, st, err := c.Get(ctx, args[0], readOpts(*stale)...)
				if err != nil {
					return err
				}
				v := struct {
					Path string `json:"path"`
					jsonData
					Stat jsonStat `json:"stat"`
				}{args[0], toJSONData(data), toJSONStat(st)}
				return e.emit(v, func(w io.Writer) {
					w.Write(data)
					if len(data) == 0 || data[len(data)-1] != '\n' {
						fmt.Fprintln(w)
					}
				})
			})
		},
	})

	register(&command{
		name:    "set",
		usage:   "PATH DATA [--version N]",
		summary: "replace a node's data",
		minArgs: 2, maxArgs: 2,
		setup: func(fs *flag.FlagSet) runFunc {
			version := fs.Int64("version", -1, "fail unless the node's version is N (-1: any)")
			return connected(func(ctx context.Context, e *env, c *client.Client, args []string) error {
				st, err := c.Set(ctx, args[0], []byte(args[1]), client.WithVersion(*version))
				if err != nil {
					return err
				}
				return e.emit(map[string]any{"path": args[0], "stat": toJSONStat(st)}, func(w io.Writer) {
					fmt.Fprintf(w, "%s version %d\n", args[0], st.Version)
				})
			})
		},
	})

	register(&command{
		name:    "rm",
		usage:   "PATH [--version N] [-r]",
		summary: "delete a node",
		help:    `With -r the node's subtree is deleted first, child by child (not atomic).`,
		minArgs: 1, maxArgs: 1,
		setup: func(fs *flag.FlagSet) runFunc {
			version := fs.Int64("version", -1, "fail unless the node's version is N (-1: any)")
			recursive := fs.Bool("r", false, "delete the whole subtree")
			return connected(func(ctx context.Context, e *env, c *client.Client, args []string) error {
				opts := []client.DeleteOption{client.WithVersion(*version)}
				if *recursive {
					opts = append(opts, client.Recursive())
				}
				if err := c.Delete(ctx, args[0], opts...); err != nil {
					return err
				}
				return e.emit(map[string]string{"deleted": args[0]}, func(io.Writer) {})
			})
		},
	})

	register(&command{
		name:    "ls",
		usage:   "[--stale] PATH",
		summary: "list a node's children, one name per line",
		minArgs: 1, maxArgs: 1,
		setup: func(fs *flag.FlagSet) runFunc {
			stale := fs.Bool("stale", false, "let the member asked (the first --endpoints that answers) answer from its local state (may miss recent writes)")
			return connected(func(ctx context.Context, e *env, c *client.Client, args []string) error {
				var opts []client.ChildrenOption
				if *stale {
					opts = append(opts, client.Stale())
				}
				names, err := c.Children(ctx, args[0], opts...)
				if err != nil {
					return err
				}
				if names == nil {
					names = []string{}
				}
				return e.emit(map[string]any{"path": args[0], "children": names}, func(w io.Writer) {
					for _, n := range names {
						fmt.Fprintln(w, n)
					}
				})
			})
		},
	})

	register(&command{
		name:    "stat",
		usage:   "[--stale] PATH",
		summary: "print a node's metadata",
		minArgs: 1, maxArgs: 1,
		setup: func(fs *flag.FlagSet) runFunc {
			stale := fs.Bool("stale", false, "let the member asked (the first --endpoints that answers) answer from its local state (may miss recent writes)")
			return connected(func(ctx context.Context, e *env, c *client.Client, args []string) error {
				st, err := c.Stat(ctx, args[0], readOpts(*stale)...)
				if err != nil {
					return err
				}
				return e.emit(map[string]any{"path": args[0], "stat": toJSONStat(st)}, func(w io.Writer) { printStat(w, st) })
			})
		},
	})
}

func readOpts(stale bool) []client.ReadOption {
	if stale {
		return []client.ReadOption{client.Stale()}
	}
	return nil
}

// arg returns args[i], or "" when there are fewer.
func arg(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}
