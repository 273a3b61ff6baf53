package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// electionTimeout is the raft election timeout of every member: proc
// runs latchd with its default timing, the one users get
// (server.DefaultConfig; TestElectionTimeoutIsLatchdDefault keeps them
// equal without linking the server into latch).
const electionTimeout = 500 * time.Millisecond

// recoverTimeout bounds how long the cluster may take to elect a ready
// leader again after a fault healed.
const recoverTimeout = 30 * time.Second

// storeHTTP reaches the fencedstore.
var storeHTTP = &http.Client{Timeout: 2 * time.Second}

// cluster is a run's latchd members: real processes on loopback, each with
// its own data dir under Out/members, bootstrapped together with
// --fault-injection.
type cluster struct {
	nodes []*proc.Node
	certs session.DevCerts
}

// startCluster starts n members and waits for a ready leader.
// extra are further latchd flags for every member.
func startCluster(n int, bin, dir string, certs session.DevCerts, extra ...string) (*cluster, error) {
	c := &cluster{certs: certs}
	var peers []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("n%d", i+1)
		data := filepath.Join(dir, id)
		if err := os.MkdirAll(data, 0o700); err != nil {
			return nil, err
		}
		nd, err := proc.NewDetachedNode(proc.Options{ID: id, DataDir: data}, bin, data+".log")
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, nd)
		peers = append(peers, id+"="+nd.RaftAddr)
	}
	admin, err := proc.AdminTLS(certs)
	if err != nil {
		return nil, err
	}
	for _, nd := range c.nodes {
		member, err := proc.MemberArgs(certs, nd.ID)
		if err != nil {
			return nil, err
		}
		nd.Args = append(append([]string{"--bootstrap", strings.Join(peers, ","), "--fault-injection"}, member...), extra...)
		nd.SetAdminTLS(admin)
		if err := nd.Launch(); err != nil {
			c.stop()
			return nil, err
		}
	}
	for _, nd := range c.nodes {
		if err := nd.Await("/healthz", recoverTimeout); err != nil {
			c.stop()
			return nil, fmt.Errorf("%w\n%s", err, tailFile(nd.LogPath(), 20))
		}
	}
	if _, err := c.waitStable(recoverTimeout); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// endpoints are the members' client addresses.
func (c *cluster) endpoints() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.ClientAddr)
	}
	return out
}

// apiAddrs are the members' HTTP/JSON API addresses.
func (c *cluster) apiAddrs() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.APIAddr)
	}
	return out
}

func status(nd *proc.Node) (adminapi.Status, error) {
	a, err := nd.Admin()
	if err != nil {
		return adminapi.Status{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := a.Status(ctx, nd.HTTPAddr)
	if err != nil {
		return st, fmt.Errorf("%s /v1/status: %w", nd.ID, err)
	}
	return st, nil
}

// leader returns the index of the ready leader that every running,
// unpaused member follows, or an error saying what is missing.
func (c *cluster) leader() (int, error) {
	leader, id := -1, ""
	var sts []adminapi.Status
	for i, nd := range c.nodes {
		if !nd.Running() || nd.Paused() {
			continue
		}
		st, err := status(nd)
		if err != nil {
			return -1, err
		}
		sts = append(sts, st)
		if st.State == "Leader" && st.Ready {
			if leader >= 0 {
				return -1, fmt.Errorf("two ready leaders: %s and %s", id, st.ID)
			}
			leader, id = i, st.ID
		}
	}
	if leader < 0 {
		return -1, errors.New("no ready leader")
	}
	for _, st := range sts {
		if st.LeaderID != id {
			return -1, fmt.Errorf("%s follows %q, not %q", st.ID, st.LeaderID, id)
		}
	}
	return leader, nil
}

// waitStable waits until there is a ready leader that every running
// member follows and every running member is ready.
func (c *cluster) waitStable(timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		l, err := c.leader()
		if err == nil {
			for _, nd := range c.nodes {
				if nd.Running() && !nd.Paused() {
					if err = nd.Await("/readyz", time.Until(deadline)); err != nil {
						break
					}
				}
			}
		}
		if err == nil {
			return l, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("cluster not stable after %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond) // polling interval of a condition with a deadline
	}
}

// setBlocked tells member i to cut raft traffic to members to (none heals).
func (c *cluster) setBlocked(i int, to []int) error {
	addrs := []string{}
	for _, j := range to {
		addrs = append(addrs, c.nodes[j].RaftAddr)
	}
	a, err := c.nodes[i].Admin()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := a.Do(ctx, http.MethodPost, c.nodes[i].HTTPAddr, "/v1/faults", map[string][]string{"block": addrs}, nil); err != nil {
		return fmt.Errorf("%s /v1/faults: %w", c.nodes[i].ID, err)
	}
	return nil
}

// partition cuts every pair across sides a and b.
func (c *cluster) partition(a, b []int) error {
	for _, i := range a {
		if err := c.setBlocked(i, b); err != nil {
			return err
		}
	}
	for _, i := range b {
		if err := c.setBlocked(i, a); err != nil {
			return err
		}
	}
	return nil
}

// heal unblocks every running member.
func (c *cluster) heal() error {
	var errs []error
	for i, nd := range c.nodes {
		if nd.Running() && !nd.Paused() {
			errs = append(errs, c.setBlocked(i, nil))
		}
	}
	return errors.Join(errs...)
}

// kill sends SIGKILL to member i and waits for it to die.
func (c *cluster) kill(i int) error {
	nd := c.nodes[i]
	if err := nd.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	_, err := nd.WaitExit(10 * time.Second)
	return err
}

// restart starts an exited member again on its data and addresses.
func (c *cluster) restart(i int) error {
	nd := c.nodes[i]
	var err error
	// The dead process's ports are free again once the kernel says so.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err = nd.Launch(); err == nil {
			if err = nd.Await("/healthz", recoverTimeout); err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("restart %s: %w\n%s", nd.ID, err, tailFile(nd.LogPath(), 20))
		}
		time.Sleep(200 * time.Millisecond) // retrying a bind, not waiting for an observable condition
	}
}

// stop resumes paused members and stops all: SIGTERM, then SIGKILL.
func (c *cluster) stop() {
	for _, nd := range c.nodes {
		if nd.Running() {
			nd.Signal(syscall.SIGCONT)
			nd.Signal(syscall.SIGTERM)
		}
	}
	for _, nd := range c.nodes {
		if nd.Running() {
			if _, err := nd.WaitExit(10 * time.Second); err != nil {
				nd.Signal(syscall.SIGKILL)
				nd.WaitExit(5 * time.Second)
			}
		}
	}
}

// storeProc is the fencedstore process.
type storeProc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
}

// startStore starts fencedstore on a free port with its journal in dir.
func startStore(bin, dir string, ignoreTokens bool) (*storeProc, error) {
	addrFile := filepath.Join(dir, "fencedstore.addr")
	os.Remove(addrFile)
	args := []string{"--addr", "127.0.0.1:0", "--addr-file", addrFile, "--journal", filepath.Join(dir, "fencedstore-journal.jsonl")}
	if ignoreTokens {
		args = append(args, "--ignore-tokens")
	}
	logf, err := os.Create(filepath.Join(dir, "fencedstore.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	s := &storeProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(addrFile)
		if err == nil && len(b) > 0 {
			s.addr = string(b)
			if resp, err := storeHTTP.Get("http://" + s.addr + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return s, nil
				}
			}
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("fencedstore exited\n%s", tailFile(filepath.Join(dir, "fencedstore.log"), 20))
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("fencedstore did not come up")
		}
		time.Sleep(20 * time.Millisecond) // polling interval of a condition with a deadline
	}
}

// history fetches GET /history.
func (s *storeProc) history(ctx context.Context) ([]StoreRecord, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+"/history", nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fencedstore /history: %s", resp.Status)
	}
	return decodeLines[StoreRecord](resp.Body, "fencedstore /history")
}

func (s *storeProc) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// tailFile returns the last n lines of a log file, for error messages.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
