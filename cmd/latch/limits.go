package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/latch-io/latch/server/adminapi"
)

// limitsReply is the admin endpoint's /v1/limits answer: the cluster
// settings by their JSON names, and the revision that set them.
type limitsReply struct {
	Revision uint64           `json:"revision"`
	Limits   map[string]int64 `json:"limits"`
}

func init() {
	register(&command{
		name:    "limits",
		usage:   "[set NAME=VALUE ...]",
		summary: "show or change the cluster settings (limits replicated through the log)",
		help: `The cluster settings are the limits every member enforces the same way
(path length, node data size, multi size, lock-grant batch, lock-delay
default and cap, session TTL bounds, ...). They live in the log: the first leader records its
flags, later flags are ignored, and this command changes them.

  latch limits                          every setting and the revision that set it
  latch limits set NAME=VALUE ...       change the named settings, keep the others
                                        (e.g. default_lock_delay_ms=2000)

A change applies only if nobody changed the settings since they were read.`,
		minArgs: 0, maxArgs: 64,
		setup: func(fs *flag.FlagSet) runFunc {
			return adminCall(func(ctx context.Context, e *env, ac *adminapi.Client, addr string, args []string) error {
				var cur limitsReply
				if err := ac.Do(ctx, http.MethodGet, addr, "/v1/limits", nil, &cur); err != nil {
					return err
				}
				reply := cur
				if len(args) > 0 {
					if args[0] != "set" || len(args) < 2 {
						return fmt.Errorf("%w: latch limits %s", errUsage, commands["limits"].usage)
					}
					change := map[string]int64{}
					for _, a := range args[1:] {
						k, v, ok := strings.Cut(a, "=")
						n, err := strconv.ParseInt(v, 10, 64)
						if !ok || err != nil {
							return fmt.Errorf("%w: %q is not NAME=INTEGER", errUsage, a)
						}
						if _, known := cur.Limits[k]; !known {
							return fmt.Errorf("%w: no setting %q (latch limits lists them)", errUsage, k)
						}
						change[k] = n
					}
					body, _ := json.Marshal(change)
					req := struct {
						Revision uint64          `json:"revision"`
						Limits   json.RawMessage `json:"limits"`
					}{cur.Revision, body}
					if err := ac.Do(ctx, http.MethodPut, addr, "/v1/limits", req, &reply); err != nil {
						return err
					}
				}
				return e.emit(reply, func(w io.Writer) {
					names := make([]string, 0, len(reply.Limits))
					for k := range reply.Limits {
						names = append(names, k)
					}
					sort.Strings(names)
					tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
					fmt.Fprintf(tw, "SETTING\tVALUE\t(revision %d)\n", reply.Revision)
					for _, k := range names {
						fmt.Fprintf(tw, "%s\t%d\t\n", k, reply.Limits[k])
					}
					tw.Flush()
				})
			})
		},
	})
}
