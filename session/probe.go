package session

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
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
// when; that member must still pass TLS verification.
//
// The probe is also the admission queue. A client about to dial asks,
// from the socket it will dial from (Dialer), "may I connect?" (askConnect,
// with askResume when it brings back live sessions). The ready leader
// answers, in the probe answer it always gets heard with (unlike a
// CONNECTION_REFUSED that quic-go may drop), "come now", "come in W" (a
// slot on its admission schedule reserved for that exact source address;
// reconnects are scheduled ahead of new sessions) or "busy, ask again in
// W" (its queue is full). The client waits W, then dials; the member
// admits the handshake from that address without charging its token
// bucket again (server/quicfront/queue.go). An old client's zero padding asks
// nothing and is answered as before; an old member ignores the byte and
// answers without admission fields, which means "dial as before".
//
//	request: probeMagic | nonce (8 bytes) | ask (1) | zero padding to ProbeSize
//	answer:  probeMagic | nonce | flags (1) | len(member) (1) | member | len(leader) (1) | leader
//	         [ | admit (1) | wait in ms (4) ]   when flags has probeAdmission
const (
	// ProbeSize is the size of a probe request and the most an answer
	// may take.
	ProbeSize = 128
	// probeMagic opens every probe and answer: a zero byte, then a
	// versioned name.
	probeMagic = "\x00latch-probe/1"
	// probeLeader: the answering member is the ready leader.
	probeLeader = 1
	// probeAdmission: the answer ends with the admission fields.
	probeAdmission = 2
	// askConnect: the client asks to be admitted (the request's ask byte).
	askConnect = 1
	// askResume: it brings back sessions that live (a reconnect).
	askResume = 2
	// admissionLen is the size of the admission fields of an answer.
	admissionLen = 5
)

// Admit is a member's answer to a client that asked to connect.
type Admit uint8

const (
	// AdmitNone: no admission answer (not asked, not the ready leader, or
	// a member that predates the queue): dial as before.
	AdmitNone Admit = iota
	// AdmitNow: dial now; the handshake is admitted.
	AdmitNow
	// AdmitWait: dial after Wait, from the same address; the handshake
	// is admitted then.
	AdmitWait
	// AdmitBusy: the queue is full; ask again after Wait. The member is
	// alive, only busy.
	AdmitBusy
)

// Ask is what a probe request asks besides "who leads?".
type Ask struct {
	// Connect: the client is about to dial and asks for a slot.
	Connect bool
	// Resume: it brings back live sessions (scheduled first).
	Resume bool
}

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
	// Admit answers an Ask to connect (AdmitNone when there was none);
	// Wait is how long to wait before dialing (AdmitWait) or asking again
	// (AdmitBusy), in whole milliseconds.
	Admit Admit
	Wait  time.Duration
}

// AppendProbe returns a probe request carrying nonce and ask.
func AppendProbe(nonce uint64, ask Ask) []byte {
	b := make([]byte, 0, ProbeSize)
	b = append(b, probeMagic...)
	b = binary.BigEndian.AppendUint64(b, nonce)
	var flags byte
	if ask.Connect {
		flags |= askConnect
		if ask.Resume {
			flags |= askResume
		}
	}
	b = append(b, flags)
	return b[:ProbeSize]
}

// ParseProbe returns the nonce and ask of a probe request, or false when
// b is not one. An old client's request (zero padding) asks nothing.
func ParseProbe(b []byte) (uint64, Ask, bool) {
	if len(b) != ProbeSize || !bytes.HasPrefix(b, []byte(probeMagic)) {
		return 0, Ask{}, false
	}
	b = b[len(probeMagic):]
	flags := b[8]
	ask := Ask{Connect: flags&askConnect != 0}
	ask.Resume = ask.Connect && flags&askResume != 0
	return binary.BigEndian.Uint64(b), ask, true
}

// maxProbeWait is the longest Wait an answer can carry.
const maxProbeWait = time.Duration(1<<32-1) * time.Millisecond

// AppendProbeAnswer encodes a. Names that would make the answer longer
// than ProbeSize are left out (the client then dials without the hint).
func AppendProbeAnswer(nonce uint64, a ProbeAnswer) []byte {
	member, leader := a.Member, a.Leader
	if !namesFit(a) {
		member, leader = "", ""
	}
	b := append([]byte(probeMagic), make([]byte, 8)...)
	binary.BigEndian.PutUint64(b[len(probeMagic):], nonce)
	var flags byte
	if a.IsLeader {
		flags |= probeLeader
	}
	if a.Admit != AdmitNone {
		flags |= probeAdmission
	}
	b = append(b, flags, byte(len(member)))
	b = append(b, member...)
	b = append(b, byte(len(leader)))
	b = append(b, leader...)
	if a.Admit != AdmitNone {
		b = append(b, byte(a.Admit))
		b = binary.BigEndian.AppendUint32(b, uint32(min(max(a.Wait, 0), maxProbeWait)/time.Millisecond))
	}
	return b
}

// namesFit reports whether a's names fit in an answer beside its other
// fields.
func namesFit(a ProbeAnswer) bool {
	room := ProbeSize - len(probeMagic) - 8 - 3
	if a.Admit != AdmitNone {
		room -= admissionLen
	}
	return len(a.Member)+len(a.Leader) <= room && len(a.Member) <= 255 && len(a.Leader) <= 255
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
	flags := b[8]
	a.IsLeader = flags&probeLeader != 0
	n := int(b[9])
	b = b[10:]
	if len(b) < n+1 {
		return a, bad
	}
	a.Member = string(b[:n])
	b = b[n:]
	n = int(b[0])
	tail := 0
	if flags&probeAdmission != 0 {
		tail = admissionLen
	}
	if len(b) != 1+n+tail {
		return a, bad
	}
	a.Leader = string(b[1 : 1+n])
	if tail > 0 {
		b = b[1+n:]
		a.Admit = Admit(b[0])
		if a.Admit < AdmitNow || a.Admit > AdmitBusy {
			return ProbeAnswer{}, bad
		}
		a.Wait = time.Duration(binary.BigEndian.Uint32(b[1:])) * time.Millisecond
	}
	return a, nil
}

// ReadProbe waits for the next probe request sent to l and returns its
// nonce, what it asks and its sender. Anything else that is not QUIC is
// dropped.
func (l *Listener) ReadProbe(ctx context.Context) (uint64, Ask, net.Addr, error) {
	buf := make([]byte, ProbeSize+1)
	for {
		n, from, err := l.tr.ReadNonQUICPacket(ctx, buf)
		if err != nil {
			return 0, Ask{}, nil, err
		}
		if nonce, ask, ok := ParseProbe(buf[:n]); ok {
			return nonce, ask, from, nil
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
// datagrams). It fails with ErrRefused when nothing listens there (its
// socket is connected, so the host's ICMP refusal reaches it).
func Probe(ctx context.Context, addr string, resend time.Duration) (ProbeAnswer, error) {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return ProbeAnswer{}, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
	defer stop()
	send := func(req []byte) error {
		_, err := conn.Write(req)
		return err
	}
	recv := func(buf []byte, until time.Time) (int, error) {
		conn.SetReadDeadline(until)
		return conn.Read(buf)
	}
	return exchange(ctx, Ask{}, resend, send, recv)
}

// exchange sends a probe request asking ask, again every resend, until
// recv returns the answer to it or ctx ends. recv reads one datagram,
// failing with a deadline error at until.
func exchange(ctx context.Context, ask Ask, resend time.Duration, send func([]byte) error, recv func(buf []byte, until time.Time) (int, error)) (ProbeAnswer, error) {
	var nb [8]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return ProbeAnswer{}, err
	}
	nonce := binary.BigEndian.Uint64(nb[:])
	req := AppendProbe(nonce, ask)
	buf := make([]byte, ProbeSize+1)
	for {
		if err := send(req); err != nil {
			return ProbeAnswer{}, probeErr(ctx, err)
		}
		until := time.Now().Add(resend)
		for {
			n, err := recv(buf, until)
			if err != nil {
				if ctx.Err() != nil {
					return ProbeAnswer{}, ctx.Err()
				}
				if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
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
