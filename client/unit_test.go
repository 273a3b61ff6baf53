package client

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

func TestErrorsKeepIdentityAcrossTheWire(t *testing.T) {
	for _, want := range []error{ErrNoNode, ErrNodeExists, ErrBadVersion, ErrNotEmpty, ErrBadPath,
		ErrSessionExpired, ErrNotLeader, ErrNoLeader, ErrTooManyWatches, ErrWouldDeadlock} {
		// What the server sends for want, decoded as the client does.
		resp := session.ErrorResponse(errorsWrap(want))
		frame, err := session.EncodeResponse(resp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := session.DecodeResponse(frame[4:])
		if err != nil {
			t.Fatal(err)
		}
		if err := got.Err(); !errors.Is(err, want) {
			t.Errorf("%v came back as %v", want, err)
		}
	}
	if !errors.Is(ErrNoNode, namespace.ErrNoNode) {
		t.Fatal("client.ErrNoNode is not namespace.ErrNoNode")
	}
}

func errorsWrap(err error) error { return fmt.Errorf("%w: /some/path", err) }

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		bad  string
	}{
		{"zero is fine", Config{}, ""},
		{"no port", Config{Endpoints: []string{"localhost"}}, "Endpoints"},
		{"port 0", Config{Endpoints: []string{"127.0.0.1:0"}}, "Endpoints"},
		{"negative ttl", Config{SessionTTL: -time.Second}, "SessionTTL"},
		{"tiny ttl", Config{SessionTTL: time.Millisecond}, "SessionTTL"},
		{"negative redirects", Config{MaxRedirects: -1}, "MaxRedirects"},
		{"backoff inverted", Config{MinBackoff: time.Second, MaxBackoff: time.Millisecond}, "MaxBackoff"},
		{"negative idle failure", Config{IdleFailureTimeout: -time.Second}, "IdleFailureTimeout"},
		{"idle failure below failure", Config{FailureTimeout: time.Second, IdleFailureTimeout: 500 * time.Millisecond}, "IdleFailureTimeout"},
		{"idle failure equal to failure", Config{FailureTimeout: time.Second, IdleFailureTimeout: time.Second}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.bad == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("Validate() = %v, want ErrBadConfig naming %s", err, tc.bad)
			}
		})
	}
	if _, err := Dial(context.Background(), Config{SessionTTL: -1}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("Dial with a bad config: %v", err)
	}
}

// The QUIC keep-alive follows IdleFailureTimeout, not FailureTimeout
// (which the watchdog uses while calls wait), and every derived transport
// config is valid.
func TestTransportConfig(t *testing.T) {
	for _, cfg := range []Config{{}, {FailureTimeout: 30 * time.Millisecond, IdleFailureTimeout: 30 * time.Millisecond}, {FailureTimeout: 20 * time.Second}} {
		cfg = cfg.withDefaults()
		tc := transportConfig(cfg.FailureTimeout, cfg.IdleFailureTimeout)
		if err := tc.Validate(); err != nil {
			t.Fatalf("%v/%v: %v", cfg.FailureTimeout, cfg.IdleFailureTimeout, err)
		}
		if tc.FailureTimeout != cfg.FailureTimeout || tc.KeepAlivePeriod+tc.MaxIdleTimeout != cfg.IdleFailureTimeout || tc.KeepAlivePeriod != cfg.IdleFailureTimeout/3 {
			t.Fatalf("%v/%v: transport %+v", cfg.FailureTimeout, cfg.IdleFailureTimeout, tc)
		}
	}
	if d := DefaultConfig(); d.IdleFailureTimeout != 10*time.Second {
		t.Fatalf("default IdleFailureTimeout %v", d.IdleFailureTimeout)
	}
}

// A nil TLS config trusts the system roots and presents nothing, even
// with a development PKI in the working directory.
func TestNilTLSTrustsNothingImplicitly(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if _, err := session.EnsureDevCerts(filepath.Join(dir, "latch-data", "tls")); err != nil {
		t.Fatal(err)
	}
	conf, err := Config{}.tlsConfig()
	if err != nil {
		t.Fatal(err)
	}
	if conf.RootCAs != nil || len(conf.Certificates) != 0 || conf.GetClientCertificate != nil {
		t.Fatal("a nil TLS config must trust the system roots and present nothing")
	}
}

func TestBackoffGrowsWithJitterAndCap(t *testing.T) {
	c := &Client{cfg: Config{MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}}
	for n := range 40 {
		want := min(10*time.Millisecond<<min(n, 29), 200*time.Millisecond)
		for range 20 {
			d := c.backoff(n)
			if d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", n, d, want/2, want)
			}
		}
	}
}

func TestOptions(t *testing.T) {
	if o := buildWatch(nil); o.kind != session.WatchData|session.WatchExists {
		t.Fatalf("default watch kind %b", o.kind)
	}
	if o := buildWatch([]WatchOption{Recursive(), FromRevision(7), OneShot()}); o.kind != session.WatchRecursive || o.fromRev != 7 || !o.oneShot {
		t.Fatalf("watch options %+v", o)
	}
	if o := buildCreate([]CreateOption{Ephemeral(), Sequential()}); o.flags != namespace.FlagEphemeral|namespace.FlagSequential {
		t.Fatalf("create flags %b", o.flags)
	}
	if o, err := buildSet(nil); err != nil || o.version != namespace.AnyVersion {
		t.Fatalf("default Set version %d %v", o.version, err)
	}
	if _, err := buildDelete([]DeleteOption{WithVersion(-2)}); !errors.Is(err, ErrBadOption) {
		t.Fatalf("WithVersion(-2): %v", err)
	}
	if op := OpDelete("/a", Recursive()); !errors.Is(op.err, ErrBadOption) {
		t.Fatalf("OpDelete with Recursive: %v", op.err)
	}
	c := buildChildren([]ChildrenOption{After("b"), Limit(3), Stale()})
	if c.after != "b" || c.limit != 3 || !c.stale {
		t.Fatalf("children options %+v", c)
	}
}

// TestWatchDeliveryExactlyOnce drives the watcher's delivery with the
// streams a reconnection produces: a replay from one revision before the
// last delivered (which repeats part of that revision), events the client
// already has, and a resync.
func TestWatchDeliveryExactlyOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &Watcher{events: make(chan Event, 100), ctx: ctx, lastRev: 10}
	ev := func(rev uint64, path string) session.WatchEvent {
		return session.WatchEvent{Type: namespace.EventCreated, Path: path, Rev: rev}
	}
	skip := 0
	// First stream: revision 11 has three events; the stream breaks after
	// the second.
	if more, err := w.deliver([]session.WatchEvent{ev(11, "/a"), ev(11, "/b")}, &skip); !more || err != nil {
		t.Fatal(more, err)
	}
	from, n := w.resumePoint()
	if from != 10 || n != 2 {
		t.Fatalf("resume point %d/%d, want 10/2", from, n)
	}
	// The resumed stream replays all of revision 11, then 12.
	skip = n
	w.deliver([]session.WatchEvent{ev(11, "/a"), ev(11, "/b"), ev(11, "/c"), ev(12, "/d")}, &skip)
	// An event of an older revision than the last delivered is dropped.
	w.deliver([]session.WatchEvent{ev(11, "/c")}, &skip)
	// History gone: a resync, then later events.
	w.deliver([]session.WatchEvent{{Type: session.EventResync, Rev: 40}, ev(41, "/e")}, &skip)

	want := []string{"11 /a", "11 /b", "11 /c", "12 /d", "40 resync", "41 /e"}
	close(w.events)
	var got []string
	for e := range w.events {
		s := e.Path
		if e.Type == EventResync {
			s = "resync"
		}
		got = append(got, strconv.FormatUint(e.Revision, 10)+" "+s)
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// Probe rounds during an election stay at electionPoll for the first
// rounds (a usual election ends within them, so failover is not slowed),
// then back off up to electionPollMax.
func TestElectionPause(t *testing.T) {
	for n := range electionFastPolls {
		if d := electionPause(n); d != electionPoll {
			t.Fatalf("round %d: pause %v, want %v", n, d, electionPoll)
		}
	}
	prevMax := electionPoll
	for n := electionFastPolls; n < electionFastPolls+10; n++ {
		d := electionPause(n)
		hi := min(electionPoll<<(n-electionFastPolls+1), electionPollMax)
		if d < hi/2 || d >= hi || hi < prevMax {
			t.Fatalf("round %d: pause %v, want in [%v, %v)", n, d, hi/2, hi)
		}
		prevMax = hi
	}
	for _, n := range []int{100, 1000, 1 << 30} {
		if d := electionPause(n); d < electionPollMax/2 || d >= electionPollMax {
			t.Fatalf("round %d: pause %v, want in [%v, %v)", n, d, electionPollMax/2, electionPollMax)
		}
	}
}
