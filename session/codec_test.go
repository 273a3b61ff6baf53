package session

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
)

var update = flag.Bool("update", false, "rewrite golden files and fuzz seeds under testdata/")

func fullRequest() *Request {
	return &Request{
		Type: MsgMulti, Session: 77, Stale: true,
		ProtocolVersion: ProtocolVersion, ClientName: "cli",
		Secret: []byte{1, 2, 3}, TTLMillis: 10000,
		Path: "/a/b", Data: []byte("hello"), Flags: namespace.FlagEphemeral | namespace.FlagSequential,
		Version: namespace.AnyVersion, Recursive: true, After: "b", Limit: 100,
		Ops: []Op{
			{Type: namespace.OpCreate, Path: "/x", Data: []byte("1"), Flags: namespace.FlagEphemeral},
			{Type: namespace.OpCheck, Path: "/y", Version: 3},
		},
		Kind: WatchData | WatchRecursive, FromRev: 9, OneShot: true,
		Mode: LockShared, TimeoutMillis: 500, HoldTTLMillis: 6000, LockDelayMillis: 100,
		Node:      "/l/lock-0000000001",
		Sequencer: &Sequencer{Path: "/l", Mode: LockShared, Token: 12, Session: 77},
	}
}

func fullResponse() *Response {
	st := namespace.Stat{CreateRev: 5, ModRev: 9, Ctime: 1e18, Mtime: 1e18 + 5, Version: 2, CVersion: 1, EphemeralOwner: 77, NumChildren: 1, DataLength: 5}
	return &Response{
		Code: CodeNotLeader, Message: "latch: not the leader", Leader: "10.0.0.2:7420",
		ProtocolVersion: ProtocolVersion, ServerID: "m1",
		Session: 77, Secret: []byte{9, 9}, TTLMillis: 10000,
		Path: "/a/b", Data: []byte("hello"), Stat: st, Exists: true,
		Names: []string{"a", "b"}, More: true,
		Results: []OpResult{{Path: "/x", Stat: st}, {Code: CodeBadVersion, Message: "latch: version mismatch"}},
		Rev:     42,
		Events:  []WatchEvent{{Type: namespace.EventCreated, Path: "/a", Rev: 40, Session: 77}, {Type: EventResync, Rev: 41}},
		Lock:    LockGranted, Node: "/l/lock-0000000001", Token: 12, Valid: true,
		Sessions: []SessionInfo{{ID: 77, TTLMillis: 10000, Identity: "alice", OpenRev: 3, OpenTime: 1e18, ExpiresInMillis: 9000}},
		Members:  []MemberInfo{{ID: "m1", RaftAddr: "a:7421", ClientAddr: "a:7420", HTTPAddr: "a:7422", Leader: true, Voter: true}},
		Status:   &StatusInfo{ID: "m1", State: "leader", Term: 3, CommitIndex: 42, AppliedIndex: 42, LastIndex: 42, Sessions: 1, Watches: 2, Version: "dev", Stats: map[string]string{"k": "v"}},
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for _, req := range []*Request{fullRequest(), {Type: MsgGet, Path: "/"}, {Type: MsgSet, Version: 0}} {
		var buf bytes.Buffer
		if err := WriteRequest(&buf, req); err != nil {
			t.Fatal(err)
		}
		got, err := ReadRequest(&buf, DefaultMaxFrameSize)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, req) {
			t.Errorf("request round trip:\n got %+v\nwant %+v", got, req)
		}
	}
	for _, resp := range []*Response{fullResponse(), {}, {Rev: 1}} {
		frame, err := EncodeResponse(resp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadResponse(bytes.NewReader(frame), DefaultMaxFrameSize)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, resp) {
			t.Errorf("response round trip:\n got %+v\nwant %+v", got, resp)
		}
	}
}

// The encoding is the protocol: a changed tag or type breaks every peer of
// another build. Regenerate with -update only for a deliberate change (and
// bump ProtocolVersion if old peers cannot read it).
func TestWireGolden(t *testing.T) {
	cases := map[string]any{
		"request": fullRequest(), "response": fullResponse(),
		"mux-open":   &Request{Type: MsgMux},
		"mux-call":   &Request{Type: MsgGet, Call: 7, Path: "/a"},
		"mux-cancel": &Request{Type: MsgCancel, Call: 7},
		"mux-answer": &Response{Call: 7, Rev: 3},
	}
	for name, v := range cases {
		frame, err := appendFrame(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		got := hex.Dump(frame)
		path := filepath.Join("testdata", "wire", name+".golden")
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./session -run Golden -update)", err)
		}
		if got != string(want) {
			t.Errorf("%s encoding changed:\n%s\nwant:\n%s", name, got, want)
		}
	}
}

// Decoded byte slices and strings must not alias the pooled read buffer:
// the next read reuses it.
func TestDecodedBytesDoNotAliasBuffers(t *testing.T) {
	var buf bytes.Buffer
	WriteRequest(&buf, &Request{Type: MsgSet, Path: "/first", Data: []byte("first-data")})
	first, err := ReadRequest(&buf, DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		buf.Reset()
		WriteRequest(&buf, &Request{Type: MsgSet, Path: "/other", Data: []byte("XXXXXXXXXXXXXXXX")})
		if _, err := ReadRequest(&buf, DefaultMaxFrameSize); err != nil {
			t.Fatal(err)
		}
	}
	if first.Path != "/first" || string(first.Data) != "first-data" {
		t.Fatalf("first request changed under us: %q %q", first.Path, first.Data)
	}
}

func frameOf(body []byte) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(len(body))) // header only; caller appends
}

func TestReadFrameErrors(t *testing.T) {
	good, _ := EncodeRequest(&Request{Type: MsgGet, Path: "/a"})
	huge := binary.BigEndian.AppendUint32(nil, 0xFFFFFFFF)
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty stream", nil, io.EOF},
		{"half a header", good[:2], io.ErrUnexpectedEOF},
		{"truncated body", good[:len(good)-1], io.ErrUnexpectedEOF},
		{"header only", good[:4], io.ErrUnexpectedEOF},
		{"4 GiB announced", append(huge, 1, 2, 3), ErrFrameTooLarge},
		{"one byte over", append(binary.BigEndian.AppendUint32(nil, 16<<10+1), make([]byte, 16<<10+1)...), ErrFrameTooLarge},
		{"empty frame", []byte{0, 0, 0, 0}, ErrMalformed},
		{"garbage body", append(frameOf([]byte{0xc1, 0xc1}), 0xc1, 0xc1), ErrMalformed},
		{"not a map", append(frameOf([]byte{0x05}), 0x05), ErrMalformed},
		{"trailing bytes in body", append(frameOf(append(good[4:], 0)), append(good[4:], 0)...), ErrMalformed},
		{"bytes after the frame", append(good, 0), ErrMalformed},
		{"wrong field type", func() []byte {
			// {"t": "x"}: a string where MsgType (uint8) belongs.
			body := []byte{0x81, 0xa1, 't', 0xa1, 'x'}
			return append(frameOf(body), body...)
		}(), ErrMalformed},
		{"deep nesting", func() []byte {
			// {"zz": [[[[...]]]]}: an unknown field nested 10000 deep.
			body := append([]byte{0x81, 0xa2, 'z', 'z'}, bytes.Repeat([]byte{0x91}, 10000)...)
			body = append(body, 0xc0)
			return append(frameOf(body), body...)
		}(), ErrMalformed},
	}
	for _, c := range cases {
		_, err := ReadRequest(bytes.NewReader(c.in), 16<<10)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A clean frame is read.
	if req, err := ReadRequest(bytes.NewReader(good), 1024); err != nil || req.Path != "/a" {
		t.Fatalf("good frame: %+v %v", req, err)
	}
	// Unknown fields (from a newer peer) are ignored, not errors.
	body := []byte{0x82, 0xa1, 't', byte(MsgGet), 0xa3, 'n', 'e', 'w', 0x93, 1, 2, 3}
	if req, err := ReadRequest(bytes.NewReader(append(frameOf(body), body...)), 1024); err != nil || req.Type != MsgGet {
		t.Fatalf("unknown field: %+v %v", req, err)
	}
}

// A peer announcing a frame at the limit and sending little must cost
// about what it sent, not the announced size.
func TestReadFrameAllocatesAsBytesArrive(t *testing.T) {
	const max = 64 << 20
	in := append(binary.BigEndian.AppendUint32(nil, max), make([]byte, 100)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := ReadFrame(bytes.NewReader(in), max, nil); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v", err)
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 10*(firstChunk+4<<10) {
		t.Fatalf("10 truncated 64 MiB frames allocated %d bytes", got)
	}
}

func TestErrorCodes(t *testing.T) {
	seenCode := map[Code]bool{}
	seenName := map[string]bool{}
	for _, e := range codeTable {
		if seenCode[e.code] || seenName[e.name] || e.code == CodeOK {
			t.Fatalf("code %d / name %s duplicated or zero", e.code, e.name)
		}
		seenCode[e.code], seenName[e.name] = true, true
		if !strings.HasPrefix(e.err.Error(), "latch: ") {
			t.Errorf("%v lacks the latch: prefix", e.err)
		}

		// Server side: a wrapped sentinel maps to its code.
		wrapped := fmt.Errorf("%w: /some/path", e.err)
		if got := CodeOf(wrapped); got != e.code {
			t.Errorf("CodeOf(%v) = %v, want %v", wrapped, got, e.code)
		}
		// Over the wire and back: same sentinel, server's message kept.
		resp := ErrorResponse(wrapped)
		frame, _ := EncodeResponse(resp)
		back, err := ReadResponse(bytes.NewReader(frame), DefaultMaxFrameSize)
		if err != nil {
			t.Fatal(err)
		}
		cerr := back.Err()
		if !errors.Is(cerr, e.err) || cerr.Error() != wrapped.Error() {
			t.Errorf("%v: client got %v", e.name, cerr)
		}
		if CodeOf(cerr) != e.code {
			t.Errorf("%v: CodeOf on the client = %v", e.name, CodeOf(cerr))
		}
		if e.code.String() != e.name {
			t.Errorf("String(%d) = %s", e.code, e.code.String())
		}
	}
	if CodeOf(nil) != CodeOK || CodeOK.Err("x") != nil || (&Response{}).Err() != nil {
		t.Error("OK is not nil")
	}
	if CodeOf(errors.New("boom")) != CodeInternal {
		t.Error("unknown error is not CodeInternal")
	}
	if CodeOf(fmt.Errorf("wait: %w", errContextDeadline())) != CodeTimeout {
		t.Error("context deadline is not CodeTimeout")
	}
	err := Code(999).Err("from the future")
	if !errors.Is(err, ErrUnknownCode) || !strings.Contains(err.Error(), "999") || !strings.Contains(err.Error(), "from the future") {
		t.Errorf("unknown code: %v", err)
	}
	// Both errors keep one identity: session's expiry is namespace's.
	if !errors.Is(CodeSessionExpired.Err(""), namespace.ErrSessionExpired) {
		t.Error("ErrSessionExpired is not namespace.ErrSessionExpired")
	}
	if CodeNoNode.Err("").Error() != namespace.ErrNoNode.Error() {
		t.Error("empty message does not fall back to the sentinel's")
	}
}

func TestNotLeaderCarriesLeader(t *testing.T) {
	resp := ErrorResponse(NotLeader("10.0.0.3:7420"))
	if resp.Code != CodeNotLeader || resp.Leader != "10.0.0.3:7420" {
		t.Fatalf("response %+v", resp)
	}
	frame, _ := EncodeResponse(resp)
	back, _ := ReadResponse(bytes.NewReader(frame), DefaultMaxFrameSize)
	var e *Error
	if err := back.Err(); !errors.Is(err, ErrNotLeader) || !errors.As(err, &e) || e.Leader != "10.0.0.3:7420" {
		t.Fatalf("client error %v, leader %+v", err, e)
	}
	// Per-op results of a multi carry codes too.
	r := OpResult{Code: CodeNodeExists, Message: "latch: node exists: /x"}
	if !errors.Is(r.Err(), namespace.ErrNodeExists) {
		t.Fatal("OpResult.Err lost its sentinel")
	}
}

func TestMsgTypeNames(t *testing.T) {
	for ty := MsgInvalid + 1; ty < msgTypeEnd; ty++ {
		if !ty.Valid() || ty.String() == "Unknown" {
			t.Errorf("type %d has no name or is invalid", ty)
		}
	}
	if MsgInvalid.Valid() || msgTypeEnd.Valid() || msgTypeEnd.String() != "Unknown" {
		t.Error("out-of-range types are valid")
	}
	if !MsgWatch.Streaming() || !MsgLock.Streaming() || MsgGet.Streaming() {
		t.Error("Streaming wrong")
	}
	if !MsgGet.IsRead() || MsgSet.IsRead() {
		t.Error("IsRead wrong")
	}
}

func BenchmarkEncodeGetResponse(b *testing.B) {
	resp := benchGetResponse()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = appendFrame(buf[:0], resp)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodeGetResponse(b *testing.B) {
	frame, err := EncodeResponse(benchGetResponse())
	if err != nil {
		b.Fatal(err)
	}
	r := bytes.NewReader(frame)
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		r.Reset(frame)
		if _, err := ReadResponse(r, DefaultMaxFrameSize); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeDecodeGetRequest(b *testing.B) {
	req := &Request{Type: MsgGet, Session: 12345, Path: "/service/config/database"}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := WriteRequest(&buf, req); err != nil {
			b.Fatal(err)
		}
		if _, err := ReadRequest(&buf, DefaultMaxFrameSize); err != nil {
			b.Fatal(err)
		}
	}
}

func benchGetResponse() *Response {
	return &Response{
		Path: "/service/config/database",
		Data: bytes.Repeat([]byte("x"), 256),
		Stat: namespace.Stat{CreateRev: 1000, ModRev: 123456, Ctime: 1.7e18, Mtime: 1.7e18 + 1e9, Version: 17, DataLength: 256},
		Rev:  123500,
	}
}

func errContextDeadline() error {
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	return ctx.Err()
}

// hookReader calls first before the first Read reaches r.
type hookReader struct {
	r     io.Reader
	first func()
}

func (h *hookReader) Read(p []byte) (int, error) {
	if h.first != nil {
		h.first()
		h.first = nil
	}
	return h.r.Read(p)
}

// TestIdleReaderHoldsNoBuffer: a reader waiting for its next frame (every
// idle mux stream's, on both sides) holds no read buffer; it takes one
// from the pool only once the header arrived. Thousands of idle
// connections each held 4 KiB before.
func TestIdleReaderHoldsNoBuffer(t *testing.T) {
	var taken atomic.Int64 // buffers made by the pool: each Get of an empty one
	saved := frameBufs
	defer func() { frameBufs = saved }()

	frame, err := appendFrame(nil, &Request{Type: MsgGet, Path: "/a", Call: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		read func(r io.Reader) error
	}{
		{"request", func(r io.Reader) error { _, err := readMessage(r, 1<<20, new(Request)); return err }},
		{"mux call", func(r io.Reader) error {
			_, err := newMuxServer(context.Background(), r, nil, 1<<20, time.Second).Next()
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken.Store(0)
			frameBufs = &sync.Pool{New: func() any { taken.Add(1); b := make([]byte, 0, 4<<10); return &b }}
			var atWait int64 = -1
			r := &hookReader{r: bytes.NewReader(frame), first: func() { atWait = taken.Load() }}
			if err := tc.read(r); err != nil {
				t.Fatal(err)
			}
			if atWait != 0 {
				t.Fatalf("%d read buffers taken before the first byte of the frame was read, want 0", atWait)
			}
			if got := taken.Load(); got != 1 {
				t.Fatalf("%d read buffers taken for one frame, want 1", got)
			}
		})
	}
}

// TestLockWatchEventRoundTrip: a watch frame's lock event keeps its lock
// fields (token, mode, cause, waiter) across the wire.
func TestLockWatchEventRoundTrip(t *testing.T) {
	resp := &Response{Events: []WatchEvent{
		{Type: namespace.EventLockContended, Path: "/l/lock-s-0000000001", Rev: 43, Session: 77, Token: 12, Mode: LockShared,
			Waiter: "/l/lock-x-0000000002", WaiterSession: 78},
		{Type: namespace.EventLockLost, Path: "/l/lock-s-0000000001", Rev: 44, Session: 77, Token: 12, Cause: "session-expired"},
	}}
	var buf bytes.Buffer
	if err := WriteResponse(&buf, resp); err != nil {
		t.Fatal(err)
	}
	got, err := ReadResponse(&buf, DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Events, resp.Events) {
		t.Errorf("lock events round trip:\n got %+v\nwant %+v", got.Events, resp.Events)
	}
}
