package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/latch-io/latch/client"
)

func init() {
	register(&command{
		name:    "sessions",
		usage:   "",
		summary: "list the cluster's sessions",
		maxArgs: 0,
		setup: func(fs *flag.FlagSet) runFunc {
			return connected(func(ctx context.Context, e *env, c *client.Client, _ []string) error {
				list, err := c.Sessions(ctx)
				if err != nil {
					return err
				}
				if list == nil {
					list = []client.SessionInfo{}
				}
				self := c.Session().ID()
				type row struct {
					ID          uint64 `json:"id"`
					TTL         string `json:"ttl"`
					Identity    string `json:"identity"`
					OpenRev     uint64 `json:"open_revision"`
					Opened      string `json:"opened"`
					ExpiresIn   string `json:"expires_in,omitempty"`
					ThisCommand bool   `json:"this_command,omitempty"`
				}
				rows := make([]row, len(list))
				for i, s := range list {
					rows[i] = row{ID: s.ID, TTL: ms(s.TTLMillis), Identity: s.Identity, OpenRev: s.OpenRev,
						Opened: nanos(s.OpenTime), ThisCommand: s.ID == self}
					if s.ExpiresInMillis > 0 {
						rows[i].ExpiresIn = ms(s.ExpiresInMillis)
					}
				}
				return e.emit(rows, func(w io.Writer) {
					tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "ID\tTTL\tIDENTITY\tOPENED\tEXPIRES IN\t")
					for _, r := range rows {
						mark := ""
						if r.ThisCommand {
							mark = "(this command)"
						}
						fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.TTL, dash(r.Identity), r.Opened, dash(r.ExpiresIn), mark)
					}
					tw.Flush()
				})
			})
		},
	})

	register(&command{
		name:    "members",
		usage:   "",
		summary: "list the cluster's members",
		maxArgs: 0,
		setup: func(fs *flag.FlagSet) runFunc {
			return connected(func(ctx context.Context, e *env, c *client.Client, _ []string) error {
				members, err := c.Members(ctx)
				if err != nil {
					return err
				}
				return e.emit(jsonMembers(members), func(w io.Writer) {
					tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "ID\tCLIENT\tRAFT\tHTTP\tROLE\t")
					for _, m := range members {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", m.ID, dash(m.ClientAddr), dash(m.RaftAddr), dash(m.HTTPAddr), role(m))
					}
					tw.Flush()
				})
			})
		},
	})

	register(&command{
		name:    "status",
		usage:   "",
		summary: "show the leader, term, applied index and every member's health",
		help: `Every member is asked directly (at its client address) for its state,
all at once; one that does not answer within --member-timeout is "down"
(-o json says why in its error field). With --cells every cell of the map
is shown, one after another ("== cell NAME"; -o json: {"cells": {NAME: ...}});
a cell that does not answer is "down" and the others are still shown.`,
		maxArgs: 0,
		setup: func(fs *flag.FlagSet) runFunc {
			memberTimeout := fs.Duration("member-timeout", time.Second, "how long each member has to answer")
			one := func(ctx context.Context, c *client.Client) (map[string]any, func(w io.Writer), error) {
				leader, leaderAddr, err := c.Status(ctx)
				if err != nil {
					return nil, nil, err
				}
				members, err := c.Members(ctx)
				if err != nil {
					return nil, nil, err
				}
				health := memberHealth(ctx, c, members, *memberTimeout)
				v := map[string]any{
					"leader":         leader.ID,
					"leader_address": leaderAddr,
					"term":           leader.Term,
					"commit_index":   leader.CommitIndex,
					"applied_index":  leader.AppliedIndex,
					"sessions":       leader.Sessions,
					"watches":        leader.Watches,
					"version":        leader.Version,
					"members":        health,
				}
				return v, func(w io.Writer) {
					fmt.Fprintf(w, "leader         %s (%s)\n", leader.ID, dash(leaderAddr))
					fmt.Fprintf(w, "term           %d\n", leader.Term)
					fmt.Fprintf(w, "commit index   %d\n", leader.CommitIndex)
					fmt.Fprintf(w, "applied index  %d\n", leader.AppliedIndex)
					fmt.Fprintf(w, "sessions       %d\n", leader.Sessions)
					fmt.Fprintf(w, "watches        %d\n\n", leader.Watches)
					tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "MEMBER\tCLIENT\tHEALTH\tSTATE\tTERM\tAPPLIED\tLAG\tVERSION\t")
					for _, h := range health {
						if h.Health != "ok" {
							fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t-\t\n", h.ID, dash(h.ClientAddr), h.Health)
							continue
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t\n", h.ID, dash(h.ClientAddr), h.Health, dash(h.State), h.Term, h.AppliedIndex, h.Lag, dash(h.Version))
					}
					tw.Flush()
				}, nil
			}
			single := connected(func(ctx context.Context, e *env, c *client.Client, _ []string) error {
				v, text, err := one(ctx, c)
				if err != nil {
					return err
				}
				return e.emit(v, text)
			})
			return func(ctx context.Context, e *env, args []string) error {
				if e.g.cells == "" {
					return single(ctx, e, args)
				}
				return cellsStatus(ctx, e, one)
			}
		},
	})
}

// cellsStatus is status for every cell of the --cells map, one after
// another: a cell that does not answer is shown with its error and the
// others still are.
func cellsStatus(ctx context.Context, e *env, one func(context.Context, *client.Client) (map[string]any, func(io.Writer), error)) error {
	ctx, cancel := e.withTimeout(ctx)
	defer cancel()
	x, err := e.cellsClient(ctx)
	if err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(x.Map()))
	all := map[string]any{}
	texts := make([]func(io.Writer), len(names))
	for i, name := range names {
		cctx, ccancel := context.WithTimeout(ctx, e.g.timeout/time.Duration(len(names)))
		c, err := x.Client(cctx, "/"+name)
		var v map[string]any
		if err == nil {
			v, texts[i], err = one(cctx, c)
		}
		ccancel()
		if err != nil {
			all[name] = map[string]any{"error": err.Error()}
			msg := err.Error()
			texts[i] = func(w io.Writer) { fmt.Fprintf(w, "down: %s\n", msg) }
			continue
		}
		all[name] = v
	}
	return e.emit(map[string]any{"cells": all}, func(w io.Writer) {
		for i, name := range names {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "== cell %s\n", name)
			texts[i](w)
		}
	})
}

type memberJSON struct {
	ID         string `json:"id"`
	ClientAddr string `json:"client_addr"`
	RaftAddr   string `json:"raft_addr"`
	HTTPAddr   string `json:"http_addr"`
	Leader     bool   `json:"leader"`
	Voter      bool   `json:"voter"`
}

func jsonMembers(ms []client.MemberInfo) []memberJSON {
	out := make([]memberJSON, len(ms))
	for i, m := range ms {
		out[i] = memberJSON{m.ID, m.ClientAddr, m.RaftAddr, m.HTTPAddr, m.Leader, m.Voter}
	}
	return out
}

// health is one member's answer to a direct status request.
type health struct {
	ID           string `json:"id"`
	ClientAddr   string `json:"client_addr"`
	Health       string `json:"health"`          // "ok" or "down"
	Error        string `json:"error,omitempty"` // why down
	State        string `json:"state,omitempty"`
	Term         uint64 `json:"term,omitempty"`
	AppliedIndex uint64 `json:"applied_index,omitempty"`
	// Lag is how far the member's applied index is behind the highest.
	Lag uint64 `json:"lag"`
	// Version is the member's latchd build.
	Version string `json:"version,omitempty"`
}

// memberHealth asks every member for its status, in parallel, giving each
// at most timeout.
func memberHealth(ctx context.Context, c *client.Client, members []client.MemberInfo, timeout time.Duration) []health {
	out := make([]health, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		out[i] = health{ID: m.ID, ClientAddr: m.ClientAddr, Health: "down"}
		if m.ClientAddr == "" {
			out[i].Error = "no client address published"
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			st, err := c.StatusOf(ctx, m.ClientAddr)
			if err != nil {
				out[i].Error = err.Error()
				return
			}
			out[i].Health = "ok"
			out[i].State, out[i].Term, out[i].AppliedIndex, out[i].Version = st.State, st.Term, st.AppliedIndex, st.Version
		})
	}
	wg.Wait()
	var top uint64
	for _, h := range out {
		top = max(top, h.AppliedIndex)
	}
	for i := range out {
		if out[i].Health == "ok" {
			out[i].Lag = top - out[i].AppliedIndex
		}
	}
	return out
}

func role(m client.MemberInfo) string {
	switch {
	case m.Leader:
		return "leader"
	case m.Voter:
		return "voter"
	}
	return "non-voter"
}

func ms(n int64) string { return (time.Duration(n) * time.Millisecond).String() }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
