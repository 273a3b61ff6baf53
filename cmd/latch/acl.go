package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/latch-io/latch/client"
)

func init() {
	register(&command{
		name:    "acl",
		usage:   "list | set IDENTITY PREFIX RIGHTS | rm IDENTITY PREFIX | apply FILE",
		summary: "list and change the namespace's ACL rules",
		help: `Rules give an identity (client certificate CN or URI SAN; "*" for any;
"" for clients without a certificate) rights on a path prefix and all below
it: r read, w write, c create, d delete, a admin (all of them, plus changing
rules under the prefix and removing other sessions' nodes), "all", or "none"
to deny. An identity's most specific rule wins, then the most specific "*"
rule, then the cluster default. Changing rules needs admin on their prefix.

  latch acl list
  latch acl set alice /jobs rwcd
  latch acl set '*' /public r
  latch acl rm alice /jobs
  latch acl apply rules.txt     one rule a line: IDENTITY PREFIX RIGHTS (# comments)`,
		minArgs: 1,
		maxArgs: 4,
		setup: func(fs *flag.FlagSet) runFunc {
			return connected(func(ctx context.Context, e *env, c *client.Client, args []string) error {
				return runACL(ctx, e, c, args)
			})
		},
	})
}

func runACL(ctx context.Context, e *env, c *client.Client, args []string) error {
	want := func(n int) error {
		if len(args) != n {
			return fmt.Errorf("%w: acl %s takes %d arguments", errUsage, args[0], n-1)
		}
		return nil
	}
	switch args[0] {
	case "list", "ls":
		if err := want(1); err != nil {
			return err
		}
		a, err := c.ACL(ctx)
		if err != nil {
			return err
		}
		return printACL(e, a)
	case "set":
		if err := want(4); err != nil {
			return err
		}
		rules, err := client.ParseRules(fmt.Sprintf("%q %s %s", args[1], args[2], args[3]))
		if err != nil {
			return err
		}
		return c.SetACL(ctx, rules...)
	case "rm":
		if err := want(3); err != nil {
			return err
		}
		rules, err := client.ParseRules(fmt.Sprintf("%q %s none", args[1], args[2]))
		if err != nil {
			return err
		}
		return c.RemoveACL(ctx, rules...)
	case "apply":
		if err := want(2); err != nil {
			return err
		}
		text, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		rules, err := client.ParseRules(string(text))
		if err != nil {
			return fmt.Errorf("%s: %w", args[1], err)
		}
		if len(rules) == 0 {
			return fmt.Errorf("%s: no rules", args[1])
		}
		return c.SetACL(ctx, rules...)
	}
	return fmt.Errorf("%w: unknown acl command %q (list, set, rm, apply)", errUsage, args[0])
}

func printACL(e *env, a client.ACL) error {
	type rule struct {
		Identity string `json:"identity"`
		Prefix   string `json:"prefix"`
		Rights   string `json:"rights"`
	}
	out := struct {
		Enforced bool   `json:"enforced"`
		Default  string `json:"default"`
		Rules    []rule `json:"rules"`
	}{Enforced: a.Enforced, Default: a.Default.String(), Rules: []rule{}}
	for _, r := range a.Rules {
		out.Rules = append(out.Rules, rule{r.Identity, r.Prefix, r.Perms.String()})
	}
	return e.emit(out, func(w io.Writer) {
		if !a.Enforced {
			fmt.Fprintln(w, "ACLs are not enforced yet (the leader bootstraps them when it starts)")
		}
		fmt.Fprintf(w, "default: %s\n", a.Default)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "IDENTITY\tPREFIX\tRIGHTS")
		for _, r := range a.Rules {
			id := r.Identity
			if id == "" {
				id = `""`
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", id, r.Prefix, r.Perms)
		}
		tw.Flush()
	})
}
