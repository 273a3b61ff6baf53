package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/latch-io/latch/session"
)

// devTLSDir is where `latchd --dev` keeps its development PKI, relative to
// the directory it runs in.
const devTLSDir = "latch-data/tls"

// devTLS is the CLI's dev discovery, an explicit feature of this command
// (the client library trusts nothing it was not given): run with no --ca
// and no --cert next to `latchd --dev`, the CLI trusts ./latch-data/tls's
// CA and presents a client certificate of its own, issued with that dev CA
// for the identity "dev-<OS user>" (session.DevIdentity) and kept in
// ./latch-data/tls/clients. Dev clients so have their own identities, not
// one shared by all. It returns nil when there is no dev PKI.
func devTLS(dir string) (*tls.Config, error) {
	ca := filepath.Join(dir, "ca.pem")
	if _, err := os.Stat(ca); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	d := session.DevCerts{Dir: dir, CA: ca, CAKey: filepath.Join(dir, "ca-key.pem")}
	cert, key, err := d.Client(session.DevIdentity())
	if err != nil {
		return nil, fmt.Errorf("latch: dev discovery in %s: %w (pass --ca, --cert and --key)", dir, err)
	}
	return session.ClientTLS(ca, cert, key)
}
