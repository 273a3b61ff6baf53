package servertest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// connect dials from a to b and returns both ends.
func connect(t *testing.T, a, b raft.StreamLayer) (dialed, accepted net.Conn) {
	t.Helper()
	dialed, err := a.Dial(raft.ServerAddress(b.Addr().String()), time.Second)
	if err != nil {
		t.Fatalf("dial %v: %v", b.Addr(), err)
	}
	accepted, err = b.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if accepted.RemoteAddr().String() != a.Addr().String() {
		t.Fatalf("accepted from %v, want %v", accepted.RemoteAddr(), a.Addr())
	}
	t.Cleanup(func() { dialed.Close(); accepted.Close() })
	return dialed, accepted
}

func listen(t *testing.T, n *Network) raft.StreamLayer {
	t.Helper()
	l, err := n.Listen("memnet:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// wantEOF reads c expecting the end of the stream.
func wantEOF(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(WaitTimeout))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("%s: read %d, %v; want EOF", what, n, err)
	}
}

// Bytes cross in order both ways, more than a buffer's worth included
// (the writer waits for the reader); deadlines time out as net.Conn's do.
func TestNetworkCarriesBytes(t *testing.T) {
	n := NewNetwork()
	a, b := listen(t, n), listen(t, n)
	if a.Addr().String() == b.Addr().String() {
		t.Fatalf("two listeners on %v", a.Addr())
	}
	if _, err := n.Listen(a.Addr().String()); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("second listener on %v: %v, want EADDRINUSE", a.Addr(), err)
	}
	d, c := connect(t, a, b)

	big := bytes.Repeat([]byte("0123456789abcdef"), 3*streamBuffer/16+7)
	wrote := make(chan error, 1)
	go func() { _, err := d.Write(big); wrote <- err }()
	got := make([]byte, len(big))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) {
		t.Fatal("bytes arrived changed or out of order")
	}
	if _, err := c.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(d, got[:4]); err != nil || string(got[:4]) != "pong" {
		t.Fatalf("read %q, %v", got[:4], err)
	}

	c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := c.Read(got); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v", err)
	}
	c.SetReadDeadline(time.Time{})
	d.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := d.Write(big); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write into a full buffer past its deadline: %v", err)
	}

	d.Close()
	if _, err := d.Read(got); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
	io.ReadFull(c, make([]byte, streamBuffer)) // what the deadline let through
	wantEOF(t, c, "peer of a closed end")
}

// A cut resets the connections that cross it and refuses dials across
// it, but not as a dead port does; other links stay up; Heal mends it.
// A closed listener's address refuses dials (ECONNREFUSED: the crash
// detector's sign of a dead member) and its connections are reset.
func TestNetworkPartitionAndClose(t *testing.T) {
	n := NewNetwork()
	a, b, c := listen(t, n), listen(t, n), listen(t, n)
	ab, ba := connect(t, a, b)
	ac, ca := connect(t, a, c)
	bc, cb := connect(t, b, c)

	n.Partition([]string{a.Addr().String()}, []string{b.Addr().String(), c.Addr().String()})
	wantEOF(t, ab, "dialer across the cut")
	wantEOF(t, ba, "acceptor across the cut")
	wantEOF(t, ac, "dialer across the cut")
	wantEOF(t, ca, "acceptor across the cut")
	if _, err := ab.Write([]byte("x")); err == nil {
		t.Fatal("write across the cut succeeded")
	}
	for _, to := range []raft.StreamLayer{b, c} {
		_, err := a.Dial(raft.ServerAddress(to.Addr().String()), time.Second)
		if err == nil || errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial across the cut: %v, want an error other than refused", err)
		}
	}
	if _, err := bc.Write([]byte("y")); err != nil {
		t.Fatalf("link inside a side: %v", err)
	}
	if _, err := io.ReadFull(cb, make([]byte, 1)); err != nil {
		t.Fatalf("link inside a side: %v", err)
	}

	n.Heal()
	connect(t, b, a)

	c.Close()
	wantEOF(t, bc, "connection to a closed listener")
	if _, err := b.Dial(raft.ServerAddress(c.Addr().String()), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial to a closed listener: %v, want ECONNREFUSED", err)
	}
	if _, err := c.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept on a closed listener: %v", err)
	}
	// The address is free again, as a restarted member needs.
	again, err := n.Listen(c.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	connect(t, b, again)
}
