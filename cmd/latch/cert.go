package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/latch-io/latch/session"
)

func init() {
	register(&command{
		name:    "cert",
		usage:   "ca|member|client [--dir DIR] [--id ID --hosts H,H | --name NAME] [--days N] [--force]",
		summary: "make a cluster CA, member certificates and client certificates",
		help: `
Certificates for a cluster, all in --dir (default ./latch-certs):

  latch cert ca                                   ca.pem, ca-key.pem (keep the key offline)
  latch cert member --id n1 --hosts 10.0.0.1,n1.example
                                                  member-n1.pem, member-n1-key.pem
  latch cert client --name alice                  client-alice.pem, client-alice-key.pem

A member certificate names its member id by the URI SAN latch://member/ID and
lists --hosts (IP addresses or DNS names) as SANs; latchd takes it with
--member-cert/--member-key and the CA with --cluster-ca. A client
certificate names an identity (its common name): the identity of every
session it opens, and an admin on the admin endpoint when latchd --admins
lists it. member and client need ca.pem and ca-key.pem in --dir. Existing
files are never overwritten without --force.`,
		minArgs: 1,
		maxArgs: 1,
		setup: func(fs *flag.FlagSet) runFunc {
			dir := fs.String("dir", "latch-certs", "directory of ca.pem and ca-key.pem, and of the files written")
			id := fs.String("id", "", "member: the member id (latchd --id)")
			hosts := fs.String("hosts", "", "member: IP addresses and DNS names clients and operators reach it by, comma-separated")
			name := fs.String("name", "", "client: the identity the certificate names")
			days := fs.Int("days", 0, "validity in days (default: CA 3650, others 825)")
			force := fs.Bool("force", false, "overwrite existing files")
			return func(_ context.Context, e *env, args []string) error {
				c := certRun{dir: *dir, id: *id, hosts: *hosts, name: *name, days: *days, force: *force}
				files, err := c.run(args[0], time.Now())
				for _, f := range files {
					fmt.Fprintln(e.stdout, f)
				}
				return err
			}
		},
	})
}

type certRun struct {
	dir, id, hosts, name string
	days                 int
	force                bool
}

func (c certRun) validity(def int) time.Duration {
	d := c.days
	if d <= 0 {
		d = def
	}
	return time.Duration(d) * 24 * time.Hour
}

// run makes the certificate kind and returns the files written.
func (c certRun) run(kind string, now time.Time) ([]string, error) {
	caCert, caKey := filepath.Join(c.dir, "ca.pem"), filepath.Join(c.dir, "ca-key.pem")
	if kind == "ca" {
		if err := c.free(caCert, caKey); err != nil {
			return nil, err
		}
		ca, err := session.NewCA("latch cluster CA", now, c.validity(3650))
		if err != nil {
			return nil, err
		}
		key, err := ca.KeyPEM()
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(c.dir, 0o700); err != nil {
			return nil, err
		}
		if err := (session.Leaf{Cert: ca.CertPEM(), Key: key}).Write(caCert, caKey); err != nil {
			return nil, err
		}
		return []string{caCert, caKey}, nil
	}
	var out, outKey string
	var issue func(*session.CA) (session.Leaf, error)
	switch kind {
	case "member":
		if c.id == "" || c.hosts == "" {
			return nil, fmt.Errorf("%w: cert member needs --id and --hosts", errUsage)
		}
		out, outKey = filepath.Join(c.dir, "member-"+c.id+".pem"), filepath.Join(c.dir, "member-"+c.id+"-key.pem")
		issue = func(ca *session.CA) (session.Leaf, error) {
			return ca.IssueMember(c.id, strings.Split(c.hosts, ","), now, c.validity(825))
		}
	case "client":
		if c.name == "" {
			return nil, fmt.Errorf("%w: cert client needs --name", errUsage)
		}
		if strings.ContainsAny(c.name, `/\`) {
			return nil, fmt.Errorf("%w: cert client: --name %q: no '/' or '\\' (it names the files)", errUsage, c.name)
		}
		out, outKey = filepath.Join(c.dir, "client-"+c.name+".pem"), filepath.Join(c.dir, "client-"+c.name+"-key.pem")
		issue = func(ca *session.CA) (session.Leaf, error) {
			return ca.IssueClient(c.name, now, c.validity(825))
		}
	default:
		return nil, fmt.Errorf("%w: cert %q: want ca, member or client", errUsage, kind)
	}
	ca, err := session.LoadCA(caCert, caKey)
	if err != nil {
		return nil, fmt.Errorf("%w (make one with `latch cert ca --dir %s`)", err, c.dir)
	}
	if err := c.free(out, outKey); err != nil {
		return nil, err
	}
	leaf, err := issue(ca)
	if err != nil {
		return nil, err
	}
	if err := leaf.Write(out, outKey); err != nil {
		return nil, err
	}
	return []string{out, outKey}, nil
}

// free refuses to overwrite existing files without --force.
func (c certRun) free(files ...string) error {
	if c.force {
		return nil
	}
	for _, f := range files {
		if _, err := os.Stat(f); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("latch: %s exists (--force overwrites it)", f)
		}
	}
	return nil
}
