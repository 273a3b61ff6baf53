package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"

	"github.com/latch-io/latch/server/adminapi"
)

func init() {
	register(&command{
		name:    "member",
		usage:   "list | add [--learner] ID RAFTADDR | promote ID | remove ID",
		summary: "list, add, promote and remove cluster members",
		help: `Membership goes through the leader's admin endpoint (--admin, else the
admin address the leader publishes). It is raft's configuration: voters
elect the leader and count for commits; learners (added with --learner)
receive the log but do not vote until promoted.

  list                         every member: id, addresses, role
  add [--learner] ID RAFTADDR  put ID into the configuration; then start its
                               latchd with --id ID --raft-addr RAFTADDR --join ADMIN
                               (a member started with --join and no data adds
                               itself as a voter without this step)
  promote ID                   make learner ID a voter (once it has caught up)
  remove ID                    take ID out; the removed latchd stops itself

An even number of voters is allowed but warned about: four voters tolerate
one failure, like three.`,
		minArgs: 1, maxArgs: 3,
		setup: func(fs *flag.FlagSet) runFunc {
			learner := fs.Bool("learner", false, "add: as a learner (non-voter)")
			return adminCall(func(ctx context.Context, e *env, ac *adminapi.Client, addr string, args []string) error {
				var reply adminapi.MembersReply
				var err error
				want := func(n int) error {
					if len(args) != n {
						return fmt.Errorf("%w: latch member %s", errUsage, commands["member"].usage)
					}
					return nil
				}
				switch args[0] {
				case "list":
					if err = want(1); err == nil {
						err = ac.Do(ctx, http.MethodGet, addr, "/v1/members", nil, &reply)
					}
				case "add":
					if err = want(3); err == nil {
						err = ac.Do(ctx, http.MethodPost, addr, "/v1/members/add",
							adminapi.AddMemberRequest{ID: args[1], RaftAddr: args[2], Learner: *learner}, &reply)
					}
				case "promote":
					if err = want(2); err == nil {
						err = ac.Do(ctx, http.MethodPost, addr, "/v1/members/promote", adminapi.MemberRequest{ID: args[1]}, &reply)
					}
				case "remove":
					if err = want(2); err == nil {
						err = ac.Do(ctx, http.MethodPost, addr, "/v1/remove", adminapi.MemberRequest{ID: args[1]}, nil)
					}
					if err == nil {
						err = ac.Do(ctx, http.MethodGet, addr, "/v1/members", nil, &reply)
					}
				default:
					return fmt.Errorf("%w: latch member %s", errUsage, commands["member"].usage)
				}
				if err != nil {
					return err
				}
				if reply.Warning != "" {
					fmt.Fprintf(e.stderr, "latch: warning: %s\n", reply.Warning)
				}
				return e.emit(reply, func(w io.Writer) { memberTable(w, reply.Members) })
			})
		},
	})
}

func memberTable(w io.Writer, ms []adminapi.MemberStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tRAFT\tCLIENT\tADMIN\t")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", m.ID, memberRole(m), dash(m.RaftAddr), dash(m.ClientAddr), dash(m.HTTPAddr))
	}
	tw.Flush()
}

func memberRole(m adminapi.MemberStatus) string {
	switch {
	case m.Leader:
		return "leader"
	case m.Suffrage == "voter":
		return "voter"
	case m.Suffrage == "nonvoter":
		return "learner"
	case m.Suffrage == "staging":
		return "staging"
	}
	return "removed" // metadata left of a member no longer configured
}
