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
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
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
