package proc

import (
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/latch-io/latch/session"
)

// Cluster is a set of latchd processes bootstrapped together.
type Cluster struct {
	Nodes []*Node
	// Certs is the cluster's PKI: members' certificates, the client
	// listeners' server certificate, and AdminName's client certificate.
	// A client trusts Certs.CA; Certs.Client issues client identities.
	Certs session.DevCerts
}

// AdminName is the admin identity (--admins) of the clusters this package
// starts; AdminTLS presents its certificate.
const AdminName = "proc-admin"

// MemberArgs are the latchd flags that make id a member of the cluster on
// certs: its member certificate, the cluster CA, AdminName as admin, and
// the PKI's server certificate for the client listener.
func MemberArgs(certs session.DevCerts, id string) ([]string, error) {
	cert, key, err := certs.Member(id)
	if err != nil {
		return nil, err
	}
	return []string{"--cluster-ca", certs.CA, "--member-cert", cert, "--member-key", key, "--admins", AdminName,
		"--tls-cert", certs.ServerCert, "--tls-key", certs.ServerKey}, nil
}

// AdminTLS is the TLS config of AdminName on certs, for admin endpoints.
func AdminTLS(certs session.DevCerts) (*tls.Config, error) {
	cert, key, err := certs.Client(AdminName)
	if err != nil {
		return nil, err
	}
	return session.AdminTLS(certs.CA, cert, key)
}

// StartCluster starts n members n1..nn with --bootstrap naming all of them
// and extra flags args, and waits until each answers /healthz.
func StartCluster(t TB, n int, args ...string) *Cluster {
	t.Helper()
	return StartClusterEach(t, n, func(int) []string { return args })
}

// StartClusterEach is StartCluster with member i's extra flags from
// args(i), for clusters whose members are configured differently.
func StartClusterEach(t TB, n int, args func(i int) []string) *Cluster {
	t.Helper()
	return StartClusterCerts(t, n, func(_ session.DevCerts, i int) []string { return args(i) })
}

// StartClusterCerts is StartClusterEach for flags that name the cluster's
// PKI (e.g. --tls-client-ca certs.CA, to require client certificates).
func StartClusterCerts(t TB, n int, args func(certs session.DevCerts, i int) []string) *Cluster {
	t.Helper()
	return StartClusterIn(t, make([]string, n), args)
}

// StartClusterIn is StartClusterCerts with member i's data dir dirs[i]
// ("" for a new t.TempDir()), for members on a file system of their own.
func StartClusterIn(t TB, dirs []string, args func(certs session.DevCerts, i int) []string) *Cluster {
	t.Helper()
	c := &Cluster{}
	var err error
	if c.Certs, err = session.EnsureDevCerts(filepath.Join(t.TempDir(), "tls")); err != nil {
		t.Fatalf("proc: %v", err)
	}
	for i, dir := range dirs {
		c.Nodes = append(c.Nodes, NewNode(t, Options{ID: fmt.Sprintf("n%d", i+1), DataDir: dir}))
	}
	if err := c.bootstrap(func(i int) []string { return args(c.Certs, i) }); err != nil {
		t.Fatalf("proc: %v", err)
	}
	for _, nd := range c.Nodes {
		nd.Start(t)
	}
	for _, nd := range c.Nodes {
		nd.WaitHealthy(t)
	}
	return c
}

// bootstrap gives every member the flags that found the cluster together
// on c.Certs (--bootstrap naming all, its member certificate, AdminName as
// admin) and then extra(i), and the admin TLS the harness calls it with.
func (c *Cluster) bootstrap(extra func(i int) []string) error {
	var peers []string
	for _, nd := range c.Nodes {
		peers = append(peers, nd.ID+"="+nd.RaftAddr)
	}
	admin, err := AdminTLS(c.Certs)
	if err != nil {
		return err
	}
	for i, nd := range c.Nodes {
		member, err := MemberArgs(c.Certs, nd.ID)
		if err != nil {
			return err
		}
		nd.Args = append(append([]string{"--bootstrap", strings.Join(peers, ",")}, member...), extra(i)...)
		nd.SetAdminTLS(admin)
	}
	return nil
}

// ClientAddrs lists the members' client addresses, for a client's
// Endpoints or the CLI's --endpoints.
func (c *Cluster) ClientAddrs() []string {
	return c.addrs(func(o Options) string { return o.ClientAddr })
}

// APIAddrs lists the members' HTTP/JSON API addresses.
func (c *Cluster) APIAddrs() []string { return c.addrs(func(o Options) string { return o.APIAddr }) }

// addrs lists one address of each member.
func (c *Cluster) addrs(of func(Options) string) []string {
	addrs := make([]string, len(c.Nodes))
	for i, nd := range c.Nodes {
		addrs[i] = of(nd.Options)
	}
	return addrs
}

// WaitLeader waits until one running member reports itself the ready
// leader and every other running member that answers names it
// (Leader(Followed)), and returns its index. Paused members are left out.
func (c *Cluster) WaitLeader(t TB) int {
	t.Helper()
	leader := -1
	Eventually(t, "leader", func() (err error) {
		leader, err = c.Leader(Followed)
		return err
	})
	return leader
}
