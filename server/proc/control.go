package proc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/latch-io/latch/session"
)

// The Cluster methods below drive a cluster outside a test (`latch
// chaos`, `latch bench failover`): errors are returned, nothing is
// registered for cleanup, and the caller calls Shutdown.

// LaunchCluster starts n members n1..nn running bin, bootstrapped together
// on certs with the flags extra (e.g. --fault-injection), each with its
// data in dir/<id> and its log in dir/<id>.log, and waits until each
// answers /healthz and the cluster is Settled. On an error it stops what
// it started.
func LaunchCluster(n int, bin, dir string, certs session.DevCerts, extra ...string) (*Cluster, error) {
	c := &Cluster{Certs: certs}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("n%d", i+1)
		data := filepath.Join(dir, id)
		if err := os.MkdirAll(data, 0o700); err != nil {
			return nil, err
		}
		nd, err := NewDetachedNode(Options{ID: id, DataDir: data}, bin, data+".log")
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, nd)
	}
	if err := c.bootstrap(func(int) []string { return extra }); err != nil {
		return nil, err
	}
	err := c.launch()
	if err == nil {
		_, err = c.AwaitLeader(Settled, WaitTimeout)
	}
	if err != nil {
		c.Shutdown()
		return nil, err
	}
	return c, nil
}

// launch starts every member and waits until each answers /healthz.
func (c *Cluster) launch() error {
	for _, nd := range c.Nodes {
		if err := nd.Launch(); err != nil {
			return err
		}
	}
	for _, nd := range c.Nodes {
		if err := nd.Await("/healthz", WaitTimeout); err != nil {
			return fmt.Errorf("%w\n%s", err, tail(nd.Logs(), 20))
		}
	}
	return nil
}

// Kill sends member i SIGKILL and waits for it to die.
func (c *Cluster) Kill(i int) error {
	if err := c.Nodes[i].Signal(syscall.SIGKILL); err != nil {
		return err
	}
	_, err := c.Nodes[i].WaitExit(10 * time.Second)
	return err
}

// Relaunch starts an exited member i again on its data and addresses and
// waits until it answers /healthz.
func (c *Cluster) Relaunch(i int) error {
	nd := c.Nodes[i]
	err := Rebind(10*time.Second, func() error {
		if err := nd.Launch(); err != nil {
			return err
		}
		return nd.Await("/healthz", WaitTimeout)
	})
	if err != nil {
		return fmt.Errorf("proc: relaunch %s: %w\n%s", nd.ID, err, tail(nd.Logs(), 20))
	}
	return nil
}

// Rebind calls start until it returns nil or timeout passes, and returns
// its last error. A member started again on the addresses of its last
// run may find a port the kernel has not freed yet and fail; a moment
// later the same start works. There is nothing to observe in between, so
// this is a retry, not a wait for a condition.
func Rebind(timeout time.Duration, start func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := start()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond) // retrying a bind, not waiting for an observable condition
	}
}

// Block makes member i drop its raft traffic with the members to (none:
// all of it flows again), through the admin endpoint's POST /v1/faults:
// the members must run with --fault-injection.
func (c *Cluster) Block(i int, to ...int) error {
	addrs := []string{}
	for _, j := range to {
		addrs = append(addrs, c.Nodes[j].RaftAddr)
	}
	nd := c.Nodes[i]
	a, err := nd.Admin()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Do(ctx, http.MethodPost, nd.HTTPAddr, "/v1/faults", map[string][]string{"block": addrs}, nil); err != nil {
		return fmt.Errorf("%s /v1/faults: %w", nd.ID, err)
	}
	return nil
}

// Partition cuts the raft traffic of every pair across sides a and b,
// both ways.
func (c *Cluster) Partition(a, b []int) error {
	for _, i := range a {
		if err := c.Block(i, b...); err != nil {
			return err
		}
	}
	for _, i := range b {
		if err := c.Block(i, a...); err != nil {
			return err
		}
	}
	return nil
}

// Heal lets all raft traffic of every running, unpaused member flow again.
func (c *Cluster) Heal() error {
	var errs []error
	for i, nd := range c.Nodes {
		if nd.Running() && !nd.Paused() {
			errs = append(errs, c.Block(i))
		}
	}
	return errors.Join(errs...)
}

// Shutdown continues paused members and stops every running one: SIGTERM,
// then SIGKILL for one still running 10 seconds later.
func (c *Cluster) Shutdown() {
	for _, nd := range c.Nodes {
		if nd.Running() {
			nd.Signal(syscall.SIGCONT)
			nd.Signal(syscall.SIGTERM)
		}
	}
	for _, nd := range c.Nodes {
		if nd.Running() {
			if _, err := nd.WaitExit(10 * time.Second); err != nil {
				nd.Signal(syscall.SIGKILL)
				nd.WaitExit(5 * time.Second)
			}
		}
	}
}
