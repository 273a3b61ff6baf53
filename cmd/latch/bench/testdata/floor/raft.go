package main

// The raft floor: a plain three-member hashicorp/raft cluster with latchd's
// raft timing, one process per member (raftMember), an FSM that does
// nothing, and the leader's stage means (-stages).

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	gometrics "github.com/hashicorp/go-metrics"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

type raftResult struct {
	p50    time.Duration
	rate64 float64
}

// raftFloor starts three raft members, their transport mutual TLS when
// tlsOn (as latchd's is), and reads the leader's report.
func raftFloor(dir, certs string, tlsOn bool, dur time.Duration) (raftResult, error) {
	var res raftResult
	var members []*child
	defer func() {
		for _, m := range members {
			m.stop()
		}
	}()
	for i := range 3 {
		m, err := startChild("raft-member", fmt.Sprint(i+1), filepath.Join(dir, fmt.Sprint(i+1)), dur.String(), fmt.Sprint(tlsOn), certs)
		if err != nil {
			return res, err
		}
		members = append(members, m)
	}
	var addrs []string
	for _, m := range members {
		addrs = append(addrs, m.addr)
	}
	for _, m := range members {
		if _, err := fmt.Fprintln(m.in, strings.Join(addrs, ",")); err != nil {
			return res, err
		}
	}
	// Room for every line the members print, so that no reader blocks
	// once this returns.
	reports := make(chan string, 64)
	for _, m := range members {
		go func() {
			for m.out.Scan() {
				reports <- m.out.Text()
			}
			reports <- ""
		}()
	}
	deadline := time.After(2*time.Minute + dur)
	for exited := 0; exited < 3; {
		var line string
		select {
		case line = <-reports:
		case <-deadline:
			return res, errors.New("raft members did not report in time")
		}
		switch {
		case line == "":
			exited++
		case strings.HasPrefix(line, "p50 "):
			d, err := time.ParseDuration(strings.TrimPrefix(line, "p50 "))
			if err != nil {
				return res, err
			}
			res.p50 = d
		case strings.HasPrefix(line, "rate64 "):
			if _, err := fmt.Sscan(strings.TrimPrefix(line, "rate64 "), &res.rate64); err != nil {
				return res, err
			}
			return res, nil
		}
	}
	return res, errors.New("every raft member exited without a report")
}

// nopFSM applies nothing: the floor is raft's own cost.
type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnapshot{}, nil }
func (nopFSM) Restore(r io.ReadCloser) error       { return r.Close() }

type nopSnapshot struct{}

func (nopSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnapshot) Release()                          {}

// streamLayer is a raft.StreamLayer on a listener this process opened
// itself, so that its address is known before the peers are; with a
// client config, connections are TLS.
type streamLayer struct {
	net.Listener
	client *tls.Config
}

func (l streamLayer) Dial(a raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if l.client != nil {
		return tls.DialWithDialer(d, "tcp", string(a), l.client)
	}
	return d.Dial("tcp", string(a))
}

// raftMember runs member id: it prints its raft address, reads every
// member's address from stdin, and, when it leads, measures and reports.
// Raft's timing is latchd's default.
func raftMember(args []string) error {
	if len(args) != 5 {
		return errors.New("usage: raft-member ID DIR DURATION TLS CERTDIR")
	}
	id, dir := args[0], args[1]
	dur, err := time.ParseDuration(args[2])
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	layer := streamLayer{Listener: ln}
	if args[3] == "true" {
		stls, ctls, err := tlsConfigs(args[4])
		if err != nil {
			return err
		}
		ctls.Certificates = stls.Certificates
		layer = streamLayer{Listener: tls.NewListener(ln, stls), client: ctls}
	}
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return errors.New("no member addresses on stdin")
	}
	addrs := strings.Split(in.Text(), ",")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	log, err := wal.Open(dir)
	if err != nil {
		return err
	}
	defer log.Close()
	cache, err := raft.NewLogCache(512, log)
	if err != nil {
		return err
	}
	trans := raft.NewNetworkTransport(layer, 8, 10*time.Second, io.Discard)
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(id)
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	c.CommitTimeout, c.MaxAppendEntries, c.BatchApplyCh = 20*time.Millisecond, 256, true
	c.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: os.Stderr})
	r, err := raft.NewRaft(c, nopFSM{}, cache, log, raft.NewDiscardSnapshotStore(), trans)
	if err != nil {
		return err
	}
	if id == "1" {
		var servers []raft.Server
		for i, a := range addrs {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(fmt.Sprint(i + 1)), Address: raft.ServerAddress(a)})
		}
		if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			return err
		}
	}
	// Members that do not lead serve until the parent stops them.
	for isLeader := range r.LeaderCh() {
		if isLeader {
			break
		}
	}
	payload := make([]byte, 100)
	apply := func() error { return r.Apply(payload, 5*time.Second).Error() }
	// Warm up until both followers have taken entries.
	for range 500 {
		if err := apply(); err != nil {
			return err
		}
	}
	sink, err := stageSink()
	if err != nil {
		return err
	}
	ds := make([]time.Duration, 0, 3000)
	for range 3000 {
		t := time.Now()
		if err := apply(); err != nil {
			return err
		}
		ds = append(ds, time.Since(t))
	}
	fmt.Println("p50", p50(ds))
	printStages("1 proposer", sink)
	if sink, err = stageSink(); err != nil {
		return err
	}
	var (
		count atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	stop := time.Now().Add(dur)
	for range 64 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := apply(); err != nil {
					mu.Lock()
					first = cmpOr(first, err)
					mu.Unlock()
					return
				}
				count.Add(1)
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	printStages("64 proposers", sink)
	fmt.Println("rate64", float64(count.Load())/dur.Seconds())
	return nil
}

// stageSink gives raft's go-metrics samples from now on to a new sink.
func stageSink() (*gometrics.InmemSink, error) {
	sink := gometrics.NewInmemSink(time.Hour, time.Hour)
	cfg := gometrics.DefaultConfig("floor")
	cfg.EnableHostname, cfg.EnableRuntimeMetrics = false, false
	_, err := gometrics.NewGlobal(cfg, sink)
	return sink, err
}

// printStages prints, with -stages, the leader's means of the stages
// latchd's /metrics also has, as the phase saw them.
func printStages(phase string, sink *gometrics.InmemSink) {
	if os.Getenv(stagesEnv) == "" {
		return
	}
	fmt.Fprintf(os.Stderr, "    stages, %s:\n", phase)
	for _, iv := range sink.Data() {
		for _, name := range []string{"leader.dispatchLog", "replication.appendEntries.rpc", "commitTime"} {
			for key, agg := range iv.Samples {
				if strings.HasSuffix(key, "raft."+name) || strings.Contains(key, "raft."+name+";") {
					fmt.Fprintf(os.Stderr, "      %-45s mean %.3f ms\n", strings.TrimPrefix(key, "floor."), agg.AggregateSample.Mean())
				}
			}
		}
	}
}
