package session

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestProbeEncoding(t *testing.T) {
	req := AppendProbe(42, Ask{})
	if len(req) != ProbeSize || req[0] != 0 {
		t.Fatalf("request of %d bytes starting %#x: want %d bytes, a zero byte first (not QUIC)", len(req), req[0], ProbeSize)
	}
	if n, ask, ok := ParseProbe(req); !ok || n != 42 || ask != (Ask{}) {
		t.Fatalf("ParseProbe = %d, %+v, %v", n, ask, ok)
	}
	if _, _, ok := ParseProbe(req[:ProbeSize-1]); ok {
		t.Fatal("a short request was accepted")
	}
	// A request from a client that predates the queue: magic, nonce, zero
	// padding. It asks nothing.
	old := make([]byte, ProbeSize)
	copy(old, probeMagic)
	old[len(probeMagic)+7] = 9
	if n, ask, ok := ParseProbe(old); !ok || n != 9 || ask.Connect || ask.Resume {
		t.Fatalf("an old request parses as %d, %+v, %v; want nonce 9, no ask", n, ask, ok)
	}
	for _, ask := range []Ask{{Connect: true}, {Connect: true, Resume: true}} {
		if _, got, ok := ParseProbe(AppendProbe(1, ask)); !ok || got != ask {
			t.Fatalf("ask %+v round-trips to %+v, %v", ask, got, ok)
		}
	}
	// Resume means nothing without Connect.
	if _, got, _ := ParseProbe(AppendProbe(1, Ask{Resume: true})); got != (Ask{}) {
		t.Fatalf("a resume without a connect parses as %+v", got)
	}
	for _, a := range []ProbeAnswer{
		{},
		{Member: "n1", IsLeader: true},
		{Member: "n2", Leader: "10.0.0.1:7420"},
		{Member: "n1", IsLeader: true, Admit: AdmitNow},
		{Member: "n1", IsLeader: true, Admit: AdmitWait, Wait: 1250 * time.Millisecond},
		{Member: "n1", IsLeader: true, Admit: AdmitBusy, Wait: 3 * time.Second},
		{Member: strings.Repeat("m", 49), Leader: strings.Repeat("l", 49), Admit: AdmitWait, Wait: time.Millisecond},
		// Too long to fit: the names are left out, never the size limit.
		{Member: strings.Repeat("m", 200), Leader: strings.Repeat("l", 200)},
		{Member: strings.Repeat("m", 50), Leader: strings.Repeat("l", 50), Admit: AdmitBusy, Wait: time.Second},
	} {
		b := AppendProbeAnswer(7, a)
		if len(b) > ProbeSize {
			t.Fatalf("answer of %d bytes for a %d-byte request: amplification", len(b), ProbeSize)
		}
		got, err := ParseProbeAnswer(b, 7)
		if err != nil {
			t.Fatal(err)
		}
		want := a
		if len(a.Member)+len(a.Leader) > 98 { // the room beside the admission fields
			want.Member, want.Leader = "", ""
		}
		if got != want {
			t.Fatalf("decoded %+v, want %+v", got, want)
		}
		if _, err := ParseProbeAnswer(b, 8); err == nil {
			t.Fatal("an answer to another nonce was accepted")
		}
	}
}

// TestProbe: a listener answers probes on its QUIC port; a port nobody
// listens on is reported as refused.
func TestProbe(t *testing.T) {
	srvTLS, _ := devTLS(t)
	ln, err := Listen("127.0.0.1:0", srvTLS, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() {
		defer close(done)
		for {
			nonce, _, from, err := ln.ReadProbe(ctx)
			if err != nil {
				return
			}
			ln.AnswerProbe(nonce, from, ProbeAnswer{Member: "n1", Leader: "127.0.0.1:1"})
		}
	}()
	a, err := Probe(ctx, ln.Addr().String(), 50*time.Millisecond)
	if err != nil || a.Member != "n1" || a.Leader != "127.0.0.1:1" || a.IsLeader {
		t.Fatalf("Probe = %+v, %v", a, err)
	}

	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := udp.LocalAddr().String()
	udp.Close()
	if _, err := Probe(ctx, closed, 50*time.Millisecond); !errors.Is(err, ErrRefused) {
		t.Fatalf("Probe of a closed port = %v, want ErrRefused", err)
	}
}

// TestProbeAnswerFromOldMember: an answer without admission fields (a
// member that predates the queue, or one that was not asked) decodes with
// AdmitNone, so the client dials as before; a bad admit byte is refused.
func TestProbeAnswerFromOldMember(t *testing.T) {
	b := AppendProbeAnswer(3, ProbeAnswer{Member: "n1", IsLeader: true})
	if a, err := ParseProbeAnswer(b, 3); err != nil || a.Admit != AdmitNone || a.Wait != 0 {
		t.Fatalf("answer without admission fields: %+v, %v", a, err)
	}
	b = AppendProbeAnswer(3, ProbeAnswer{Member: "n1", IsLeader: true, Admit: AdmitWait, Wait: time.Second})
	b[len(b)-admissionLen] = 9
	if _, err := ParseProbeAnswer(b, 3); err == nil {
		t.Fatal("an unknown admit verdict was accepted")
	}
	if _, err := ParseProbeAnswer(b[:len(b)-1], 3); err == nil {
		t.Fatal("a truncated admission field was accepted")
	}
}

// recordAdmission admits everything and records the addresses asked.
type recordAdmission struct {
	mu    sync.Mutex
	addrs []string
}

func (r *recordAdmission) Admit(remote net.Addr) (func(HandshakeEnd), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addrs = append(r.addrs, remote.String())
	return func(HandshakeEnd) {}, nil
}

// TestDialerProbesFromItsDialAddress: the admission ask and the
// connection that follows it come from one source address, which is what
// a member's reservation is held for; the ask carries its flags; and the
// socket closes with the connection.
func TestDialerProbesFromItsDialAddress(t *testing.T) {
	srvTLS, cliTLS := devTLS(t)
	adm := &recordAdmission{}
	ln, err := Listen("127.0.0.1:0", srvTLS, Config{}, adm)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	type asked struct {
		ask  Ask
		from string
	}
	probes := make(chan asked, 16)
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() {
		defer close(done)
		for {
			nonce, ask, from, err := ln.ReadProbe(ctx)
			if err != nil {
				return
			}
			probes <- asked{ask, from.String()}
			ln.AnswerProbe(nonce, from, ProbeAnswer{Member: "n1", IsLeader: true, Admit: AdmitWait, Wait: 20 * time.Millisecond})
		}
	}()
	go func() {
		for ctx.Err() == nil {
			c, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	d, err := NewDialer()
	if err != nil {
		t.Fatal(err)
	}
	a, err := d.Probe(ctx, ln.Addr().String(), Ask{Connect: true, Resume: true}, 50*time.Millisecond)
	if err != nil || a.Admit != AdmitWait || a.Wait != 20*time.Millisecond || !a.IsLeader {
		t.Fatalf("Dialer.Probe = %+v, %v", a, err)
	}
	p := <-probes
	if p.ask != (Ask{Connect: true, Resume: true}) {
		t.Fatalf("the member read the ask %+v", p.ask)
	}
	conn, err := d.Dial(ctx, ln.Addr().String(), cliTLS, Config{})
	if err != nil {
		t.Fatal(err)
	}
	adm.mu.Lock()
	got := append([]string(nil), adm.addrs...)
	adm.mu.Unlock()
	if len(got) != 1 || got[0] != p.from {
		t.Fatalf("probe from %s, connection attempts from %v: the reservation would not match", p.from, got)
	}
	conn.Close()
	// The socket goes with the connection: its port is free again.
	local := d.udp.LocalAddr().String()
	for {
		u, err := net.ListenPacket("udp", local)
		if err == nil {
			u.Close()
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the dialer's socket %s still open after its connection closed: %v", local, err)
		}
		time.Sleep(10 * time.Millisecond) // polling a port's release: no event to wait on
	}
}

func FuzzParseProbeAnswer(f *testing.F) {
	f.Add(AppendProbeAnswer(1, ProbeAnswer{Member: "n1", Leader: "a:1", IsLeader: true}))
	f.Add(AppendProbe(1, Ask{Connect: true}))
	f.Add(AppendProbeAnswer(1, ProbeAnswer{Member: "n1", IsLeader: true, Admit: AdmitWait, Wait: time.Second}))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseProbeAnswer(b, 1)
		if err != nil {
			return
		}
		// Unknown flag bits are ignored; what was understood survives a
		// round trip.
		if again, err := ParseProbeAnswer(AppendProbeAnswer(1, a), 1); err != nil || (again != a && namesFit(a)) {
			t.Fatalf("%q decodes to %+v, which round-trips to %+v, %v", b, a, again, err)
		}
	})
}
