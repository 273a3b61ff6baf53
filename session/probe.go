package session

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// The leader probe is a one-datagram question on the client port, outside
// QUIC: "who leads?". A client asks every member at once before it makes a
// connection, so it completes one QUIC+TLS handshake, with the leader,
// instead of one with each member it tries; and a port nobody listens on
// answers with an ICMP refusal the client sees at once, where a QUIC
// handshake would wait for its timeout.
//
// A probe starts with a zero byte, which QUIC never sends first (its
// packets set the fixed bit 0x40), so the listener's QUIC transport hands
// it to ReadProbe. Requests are padded to ProbeSize and answers are never
// longer, so a spoofed source gains no amplification. Answers are not
// authenticated: they only choose which member the client dials next, and
// that member must still pass TLS verification.
//
//	request: probeMagic | nonce (8 bytes) | zero padding to ProbeSize
//	answer:  probeMagic | nonce | flags (1) | len(member) (1) | member | len(leader) (1) | leader
const (
	// ProbeSize is the size of a probe request and the most an answer
	// may take.
	ProbeSize = 128
	// probeMagic opens every probe and answer: a zero byte, then a
	// versioned name.
	probeMagic = "\x00latch-probe/1"
	// probeLeader: the answering member is the ready leader.
	probeLeader = 1
)

// ErrRefused: nothing listens on the address (the host answered an ICMP
// port unreachable).
var ErrRefused = errors.New("latch: nothing listening")

// ProbeAnswer is what a member says about leadership.
type ProbeAnswer struct {
	// Member is the answering member's id.
	Member string
	// IsLeader: the answering member is the ready leader.
	IsLeader bool
	// Leader is the client address of the leader the member follows and
	// heard from recently; "" when it knows none (an election runs).
	Leader string
}

// AppendProbe returns a probe request carrying nonce.
func AppendProbe(nonce uint64) []byte {
	b := make([]byte, 0, ProbeSize)
	b = append(b, probeMagic...)
	b = binary.BigEndian.AppendUint64(b, nonce)
	return b[:ProbeSize]
}

// ParseProbe returns the nonce of a probe request, or false when b is not
// one.
func ParseProbe(b []byte) (uint64, bool) {
	if len(b) != ProbeSize || !bytes.HasPrefix(b, []byte(probeMagic)) {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[len(probeMagic):]), true
}

// AppendProbeAnswer encodes a. Names that would make the answer longer
// than ProbeSize are left out (the client then dials without the hint).
func AppendProbeAnswer(nonce uint64, a ProbeAnswer) []byte {
	member, leader := a.Member, a.Leader
	room := ProbeSize - len(probeMagic) - 8 - 3
	if len(member)+len(leader) > room || len(member) > 255 || len(leader) > 255 {
		member, leader = "", ""
	}
	b := append([]byte(probeMagic), make([]byte, 8)...)
	binary.BigEndian.PutUint64(b[len(probeMagic):], nonce)
	var flags byte
	if a.IsLeader {
		flags |= probeLeader
	}
	b = append(b, flags, byte(len(member)))
	b = append(b, member...)
	b = append(b, byte(len(leader)))
	return append(b, leader...)
}

// ParseProbeAnswer decodes an answer to the probe carrying nonce.
func ParseProbeAnswer(b []byte, nonce uint64) (ProbeAnswer, error) {
	var a ProbeAnswer
	bad := fmt.Errorf("%w: not a probe answer", ErrMalformed)
	if len(b) > ProbeSize || !bytes.HasPrefix(b, []byte(probeMagic)) {
		return a, bad
	}
	b = b[len(probeMagic):]
	if len(b) < 10 || binary.BigEndian.Uint64(b) != nonce {
		return a, bad
	}
	a.IsLeader = b[8]&probeLeader != 0
	n := int(b[9])
	b = b[10:]
	if len(b) < n+1 {
		return a, bad
	}
	a.Member = string(b[:n])
	b = b[n:]
	n = int(b[0])
	if len(b) != n+1 {
		return a, bad
	}
	a.Leader = string(b[1:])
	return a, nil
}

// ReadProbe waits for the next probe request sent to l and returns its
// nonce and sender. Anything else that is not QUIC is dropped.
func (l *Listener) ReadProbe(ctx context.Context) (uint64, net.Addr, error) {
	buf := make([]byte, ProbeSize+1)
	for {
		n, from, err := l.tr.ReadNonQUICPacket(ctx, buf)
		if err != nil {
			return 0, nil, err
		}
		if nonce, ok := ParseProbe(buf[:n]); ok {
			return nonce, from, nil
		}
	}
}

// AnswerProbe sends the answer to the probe nonce from to.
func (l *Listener) AnswerProbe(nonce uint64, to net.Addr, a ProbeAnswer) error {
	_, err := l.tr.WriteTo(AppendProbeAnswer(nonce, a), to)
	return err
}

// Probe asks the member at addr (its client address) who leads, waiting
// until ctx ends. The request is sent again every resend (lost
// datagrams). It fails with ErrRefused when nothing listens there.
func Probe(ctx context.Context, addr string, resend time.Duration) (ProbeAnswer, error) {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return ProbeAnswer{}, err
	}
	defer conn.Close()
	var nb [8]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return ProbeAnswer{}, err
	}
	nonce := binary.BigEndian.Uint64(nb[:])
	req := AppendProbe(nonce)
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, ProbeSize+1)
	for {
		if _, err := conn.Write(req); err != nil {
			return ProbeAnswer{}, probeErr(ctx, err)
		}
		conn.SetReadDeadline(time.Now().Add(resend))
		for {
			n, err := conn.Read(buf)
			if err != nil {
				if ctx.Err() != nil {
					return ProbeAnswer{}, ctx.Err()
				}
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break // send again
				}
				return ProbeAnswer{}, probeErr(ctx, err)
			}
			if a, err := ParseProbeAnswer(buf[:n], nonce); err == nil {
				return a, nil
			}
		}
	}
}

func probeErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return ErrRefused
	}
	return err
}
