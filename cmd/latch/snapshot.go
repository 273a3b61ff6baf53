package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/latch-io/latch/server/adminapi"
)

func init() {
	register(&command{
		name:    "snapshot",
		usage:   "save FILE | status FILE | restore [--force] FILE",
		summary: "back up a running cluster to a file, check a backup, restore one into a new cluster",
		help: `save FILE      asks the leader for its state at one point (every write
               acknowledged before the save began is in it), writes FILE
               (checksummed: SHA-256 over the file, CRC-32C over the data)
               and checks it before renaming it into place
status FILE    checks FILE whole and prints what it holds
restore FILE   starts a new cluster from FILE: checks it, then sends it to
               the leader of a freshly started cluster, which replaces its
               empty state with the backup and sends it to the other
               members. A cluster holding nodes is refused unless
               --force (which throws that state away).

In a restored cluster the nodes, data, versions, revisions, ACL rules and
lock queues are the backup's, the member records are the new cluster's, and
raft indexes (revisions, fencing tokens) continue above the backup's.
Sessions are the backup's with a full TTL from the restore; their clients
talk to the old cluster, so they expire after their TTL unless a client
reconnects with its session: their ephemeral nodes go, their lock requests
go, and the locks they held pass to the next waiter after the lock-delay.

--timeout bounds the whole transfer (raise it for large clusters).`,
		minArgs: 2, maxArgs: 2,
		setup: func(fs *flag.FlagSet) runFunc {
			force := fs.Bool("force", false, "restore: replace a cluster that holds data")
			return func(ctx context.Context, e *env, args []string) error {
				file := args[1]
				switch args[0] {
				case "status":
					info, data, err := adminapi.ReadBackup(file)
					if err != nil {
						return err
					}
					data.Close()
					return e.emitBackup(info)
				case "save":
					return adminCall(func(ctx context.Context, e *env, ac *adminapi.Client, addr string, _ []string) error {
						info, err := saveBackup(ctx, ac, addr, file)
						if err != nil {
							return err
						}
						return e.emitBackup(info)
					})(ctx, e, nil)
				case "restore":
					if _, data, err := adminapi.ReadBackup(file); err != nil {
						return err
					} else {
						data.Close()
					}
					return adminCall(func(ctx context.Context, e *env, ac *adminapi.Client, addr string, _ []string) error {
						path := "/v1/snapshot/restore"
						if *force {
							path += "?force=true"
						}
						var info adminapi.BackupInfo
						if err := ac.Upload(ctx, addr, path, file, &info); err != nil {
							return err
						}
						fmt.Fprintf(e.stderr, "restored %s (index %d) into the cluster\n", file, info.Index)
						return e.emitBackup(info)
					})(ctx, e, nil)
				}
				return fmt.Errorf("%w: latch snapshot %s", errUsage, commands["snapshot"].usage)
			}
		},
	})
}

// saveBackup downloads a backup into a temporary file beside file, syncs
// and checks it, and renames it to file.
func saveBackup(ctx context.Context, ac *adminapi.Client, addr, file string) (adminapi.BackupInfo, error) {
	var info adminapi.BackupInfo
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".part-*")
	if err != nil {
		return info, err
	}
	defer os.Remove(tmp.Name())
	resp, err := ac.Open(ctx, http.MethodGet, addr, "/v1/snapshot/download", nil)
	if err != nil {
		tmp.Close()
		return info, err
	}
	_, err = io.Copy(tmp, resp.Body)
	resp.Body.Close()
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return info, fmt.Errorf("latch: snapshot save: %w", err)
	}
	info, data, err := adminapi.ReadBackup(tmp.Name())
	if err != nil {
		return info, fmt.Errorf("latch: snapshot save: the member's answer is not a complete backup: %w", err)
	}
	data.Close()
	if err := os.Rename(tmp.Name(), file); err != nil {
		return info, err
	}
	return info, nil
}

func (e *env) emitBackup(info adminapi.BackupInfo) error {
	return e.emit(info, func(w io.Writer) {
		fmt.Fprintf(w, "index    %d\n", info.Index)
		fmt.Fprintf(w, "created  %s by %s\n", info.Created, info.Member)
		fmt.Fprintf(w, "version  %s\n", info.Version)
		fmt.Fprintf(w, "size     %d bytes of state\n", info.Size)
		fmt.Fprintf(w, "sha256   %s (checked)\n", info.SHA256)
		var ids []string
		for _, m := range info.Members {
			ids = append(ids, m.ID)
		}
		if len(ids) > 0 {
			fmt.Fprintf(w, "members  %s\n", strings.Join(ids, ", "))
		}
	})
}
