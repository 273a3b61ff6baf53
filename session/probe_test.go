package session

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

func TestProbeEncoding(t *testing.T) {
	req := AppendProbe(42)
	if len(req) != ProbeSize || req[0] != 0 {
		t.Fatalf("request of %d bytes starting %#x: want %d bytes, a zero byte first (not QUIC)", len(req), req[0], ProbeSize)
	}
	if n, ok := ParseProbe(req); !ok || n != 42 {
		t.Fatalf("ParseProbe = %d, %v", n, ok)
	}
	if _, ok := ParseProbe(req[:ProbeSize-1]); ok {
		t.Fatal("a short request was accepted")
	}
	for _, a := range []ProbeAnswer{
		{},
		{Member: "n1", IsLeader: true},
		{Member: "n2", Leader: "10.0.0.1:7420"},
		// Too long to fit: the names are left out, never the size limit.
		{Member: strings.Repeat("m", 200), Leader: strings.Repeat("l", 200)},
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
		if len(a.Member)+len(a.Leader) > 100 {
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
			nonce, from, err := ln.ReadProbe(ctx)
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

func FuzzParseProbeAnswer(f *testing.F) {
	f.Add(AppendProbeAnswer(1, ProbeAnswer{Member: "n1", Leader: "a:1", IsLeader: true}))
	f.Add(AppendProbe(1))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseProbeAnswer(b, 1)
		if err != nil {
			return
		}
		// Unknown flag bits are ignored; what was understood survives a
		// round trip.
		if again, err := ParseProbeAnswer(AppendProbeAnswer(1, a), 1); err != nil || (again != a && len(a.Member)+len(a.Leader) <= 100) {
			t.Fatalf("%q decodes to %+v, which round-trips to %+v, %v", b, a, again, err)
		}
	})
}
