// Command floor measures what this machine allows a replicated lock
// service, with the parts latch is built on and none of latch's code: the
// disk's fsync, a UDP and a quic-go round trip between two processes,
// quic-go connection set-up (mutual TLS 1.3, ECDSA P-256 certificates,
// resumed sessions, as latch's clients connect), and a plain three-member
// hashicorp/raft cluster with latchd's raft timing: one process per
// member, raft-wal logs fsynced per append, over TCP and over mutual TLS
// (as latchd's raft runs), an FSM that does nothing, proposers inside the
// leader. latch's own figures (`latch bench`) compare to these: no latch
// write commits faster than raft alone, nor is answered faster than raft
// plus one QUIC round trip.
//
//	go run ./cmd/latch/bench/testdata/floor [-rounds 3] [-dur 10s] [-dir DIR] [-stages]
//
// DIR (default: a new directory under the system's temporary directory)
// should be on the disk the members use. -stages prints, for the one
// proposer and for the 64, the raft leader's means of the stages latchd's
// /metrics also has (raft_leader_dispatchLog, raft_replication_appendEntries_rpc,
// raft_commitTime), so that latch's raft can be held against plain raft.
// Every process this starts is stopped and every file removed before it
// exits.
package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	gometrics "github.com/hashicorp/go-metrics"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/quic-go/quic-go"
)

const (
	alpn      = "floor"
	stagesEnv = "LATCH_FLOOR_STAGES"
)

// roles are what this program does in the child processes it starts.
var roles = map[string]func(args []string) error{
	"udp-echo":    func([]string) error { return udpEcho() },
	"quic-echo":   quicEcho,
	"raft-member": raftMember,
}

func main() {
	if len(os.Args) > 1 {
		if role, ok := roles[os.Args[1]]; ok {
			if err := role(os.Args[2:]); err != nil {
				fmt.Fprintln(os.Stderr, "floor:", os.Args[1]+":", err)
				os.Exit(1)
			}
			return
		}
	}
	rounds := flag.Int("rounds", 3, "measurement rounds")
	dur := flag.Duration("dur", 10*time.Second, "length of each raft throughput phase")
	dir := flag.String("dir", "", "directory on the members' disk (default: a new temporary directory)")
	stages := flag.Bool("stages", false, "print the raft leader's stage means for the one proposer")
	flag.Parse()
	if *stages {
		// The members inherit it.
		os.Setenv(stagesEnv, "1")
	}
	if err := measureAll(*rounds, *dur, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func measureAll(rounds int, dur time.Duration, dir string) error {
	top, err := os.MkdirTemp(dir, "latch-floor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(top)
	certs := filepath.Join(top, "certs")
	if err := writeCerts(certs); err != nil {
		return err
	}
	for r := 1; r <= rounds; r++ {
		fmt.Printf("round %d\n", r)
		fs, err := fsyncLatency(top)
		if err != nil {
			return err
		}
		line("fsync, 4 KiB append", "p50 "+ms(fs))
		udp, err := udpRTT()
		if err != nil {
			return err
		}
		line("UDP round trip", "p50 "+ms(udp))
		q, err := quicFloor(certs)
		if err != nil {
			return err
		}
		line("quic-go round trip", "p50 "+ms(q.rtt))
		line("quic-go connections", fmt.Sprintf("%.0f/s (64 dialers, 5,000 held, TLS resumed)", q.dialRate))
		var withTLS raftResult
		for _, tlsOn := range []bool{false, true} {
			rf, err := raftFloor(filepath.Join(top, fmt.Sprintf("raft-%d-%v", r, tlsOn)), certs, tlsOn, dur)
			if err != nil {
				return err
			}
			over := "TCP"
			if tlsOn {
				over, withTLS = "TLS", rf
			}
			line("raft over "+over+", 1 proposer", "p50 "+ms(rf.p50))
			line("raft over "+over+", 64 proposers", fmt.Sprintf("%.0f commits/s", rf.rate64))
		}
		line("=> a write answered over QUIC", fmt.Sprintf("floor %s (raft over TLS p50 + quic-go round trip p50)", ms(withTLS.p50+q.rtt)))
	}
	return nil
}

func line(label, value string) { fmt.Printf("  %-30s %s\n", label, value) }

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

func p50(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// fsyncLatency appends 4 KiB and fsyncs, 2,000 times, as a log store does.
func fsyncLatency(dir string) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	ds := make([]time.Duration, 0, 2000)
	for range 2000 {
		t := time.Now()
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t))
	}
	return p50(ds), nil
}

// child runs this program in role args and returns it with the first
// line it prints (its address) and its output after that.
type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	addr string
}

func startChild(args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if !c.out.Scan() {
		c.stop()
		return nil, fmt.Errorf("%s: exited before naming its address", args[0])
	}
	c.addr = c.out.Text()
	return c, nil
}

func (c *child) stop() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

func udpEcho() error {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	fmt.Println(conn.LocalAddr())
	b := make([]byte, 2048)
	for {
		n, a, err := conn.ReadFromUDP(b)
		if err != nil {
			return err
		}
		conn.WriteToUDP(b[:n], a)
	}
}

func udpRTT() (time.Duration, error) {
	srv, err := startChild("udp-echo")
	if err != nil {
		return 0, err
	}
	defer srv.stop()
	raddr, err := net.ResolveUDPAddr("udp", srv.addr)
	if err != nil {
		return 0, err
	}
	conn, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	b := make([]byte, 64)
	ds := make([]time.Duration, 0, 3000)
	for range 3000 {
		t := time.Now()
		conn.SetReadDeadline(t.Add(time.Second))
		if _, err := conn.Write(b); err != nil {
			return 0, err
		}
		if _, err := conn.Read(b); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t))
	}
	return p50(ds), nil
}

// writeCerts makes a CA and, signed by it, a server and a client
// certificate (ECDSA P-256, as `latch cert` makes).
func writeCerts(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "floor CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "ca.pem"), "CERTIFICATE", caDER); err != nil {
		return err
	}
	for i, name := range []string{"server", "client"} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), DNSNames: []string{"localhost"},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(dir, name+".pem"), "CERTIFICATE", der); err != nil {
			return err
		}
		if err := writePEM(filepath.Join(dir, name+"-key.pem"), "EC PRIVATE KEY", kb); err != nil {
			return err
		}
	}
	return nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// tlsConfigs loads the certificates: the server requires a client
// certificate of the CA, as latchd does.
func tlsConfigs(dir string) (server, client *tls.Config, err error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, errors.New("no CA certificate")
	}
	sc, err := tls.LoadX509KeyPair(filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"))
	if err != nil {
		return nil, nil, err
	}
	cc, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"))
	if err != nil {
		return nil, nil, err
	}
	server = &tls.Config{Certificates: []tls.Certificate{sc}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS13, NextProtos: []string{alpn}}
	client = &tls.Config{Certificates: []tls.Certificate{cc}, RootCAs: pool, ServerName: "localhost",
		MinVersion: tls.VersionTLS13, NextProtos: []string{alpn}, ClientSessionCache: tls.NewLRUClientSessionCache(64)}
	return server, client, nil
}

// quicEcho echoes 64-byte messages on every stream of every connection.
func quicEcho(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: quic-echo CERTDIR")
	}
	stls, _, err := tlsConfigs(args[0])
	if err != nil {
		return err
	}
	ln, err := quic.ListenAddr("127.0.0.1:0", stls, &quic.Config{})
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	ctx := context.Background()
	for {
		conn, err := ln.Accept(ctx)
		if err != nil {
			return err
		}
		go func() {
			for {
				s, err := conn.AcceptStream(ctx)
				if err != nil {
					return
				}
				go func() {
					b := make([]byte, 64)
					for {
						if _, err := io.ReadFull(s, b); err != nil {
							return
						}
						if _, err := s.Write(b); err != nil {
							return
						}
					}
				}()
			}
		}()
	}
}

type quicResult struct {
	rtt      time.Duration
	dialRate float64
}

func quicFloor(certs string) (quicResult, error) {
	var res quicResult
	srv, err := startChild("quic-echo", certs)
	if err != nil {
		return res, err
	}
	defer srv.stop()
	_, ctls, err := tlsConfigs(certs)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// echo opens a connection (resuming TLS when it can) and makes n
	// round trips on one stream; it returns the connection.
	echo := func(n int, ds []time.Duration) (*quic.Conn, []time.Duration, error) {
		conn, err := quic.DialAddr(ctx, srv.addr, ctls, &quic.Config{})
		if err != nil {
			return nil, ds, err
		}
		s, err := conn.OpenStreamSync(ctx)
		if err != nil {
			conn.CloseWithError(0, "")
			return nil, ds, err
		}
		b := make([]byte, 64)
		for range n {
			t := time.Now()
			_, err := s.Write(b)
			if err == nil {
				_, err = io.ReadFull(s, b)
			}
			if err != nil {
				conn.CloseWithError(0, "")
				return nil, ds, err
			}
			ds = append(ds, time.Since(t))
		}
		return conn, ds, nil
	}
	conn, ds, err := echo(3000, make([]time.Duration, 0, 3000))
	if err != nil {
		return res, err
	}
	res.rtt = p50(ds)
	conn.CloseWithError(0, "")

	const total, dialers = 5000, 64
	var (
		next  atomic.Int64
		mu    sync.Mutex
		held  []*quic.Conn
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	for range dialers {
		wg.Go(func() {
			for next.Add(1) <= total {
				conn, _, err := echo(1, nil)
				mu.Lock()
				if err != nil {
					first = cmpOr(first, err)
				} else {
					held = append(held, conn)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, c := range held {
		c.CloseWithError(0, "")
	}
	if first != nil {
		return res, fmt.Errorf("quic-go connection %d: %w", len(held)+1, first)
	}
	res.dialRate = total / elapsed.Seconds()
	return res, nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

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
