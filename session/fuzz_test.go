package session

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
)

// Seeds live in testdata/fuzz/<Fuzz name>/ in go's corpus format and run
// with every `go test`; TestFuzzSeeds -update rewrites them from real
// messages. Run a target with e.g.
//
//	go test ./session -run '^$' -fuzz FuzzDecodeRequest -fuzztime 20s

const fuzzMax = 64 << 10

func FuzzReadFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		body, err := ReadFrame(bytes.NewReader(data), fuzzMax, nil)
		if err == nil && (len(body) == 0 || len(body) > fuzzMax || len(body) > len(data)) {
			t.Fatalf("ReadFrame returned a %d-byte body from %d bytes", len(body), len(data))
		}
		// The full readers must not panic either, whatever they return.
		ReadRequest(bytes.NewReader(data), fuzzMax)
		ReadResponse(bytes.NewReader(data), fuzzMax)
	})
}

// FuzzMuxServer feeds a client's mux stream to the server's reader: it
// must end with an error or io.EOF, never panic, and answer only calls it
// read, each with its id.
func FuzzMuxServer(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		w := &frames{}
		m := newMuxServer(context.Background(), bytes.NewReader(data), w, 1024, time.Second)
		read := map[uint64]bool{}
		for {
			call, err := m.Next()
			if err != nil {
				break
			}
			if call.ID == 0 || read[call.ID] {
				t.Fatalf("Next returned call id %d twice or zero", call.ID)
			}
			read[call.ID] = true
			if call.ID%2 == 0 { // answer some now; the others stay in flight
				m.Reply(call, &Response{Rev: call.ID})
			}
		}
		for _, resp := range w.answers(t) {
			if resp.Call == 0 {
				t.Fatalf("an answer without a call id: %+v", resp)
			}
		}
	})
}

func FuzzDecodeRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(body)
		if err != nil {
			return
		}
		stableEncoding(t, req, func(b []byte) (any, error) { return DecodeRequest(b) })
	})
}

func FuzzDecodeResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := DecodeResponse(body)
		if err != nil {
			return
		}
		_ = resp.Err() // any code, known or not, yields an error value
		stableEncoding(t, resp, func(b []byte) (any, error) { return DecodeResponse(b) })
	})
}

// stableEncoding checks that what decoded re-encodes, and that decoding
// that encoding and encoding again gives the same bytes: no message the
// decoder accepts is one we cannot send.
func stableEncoding(t *testing.T, v any, decode func([]byte) (any, error)) {
	t.Helper()
	first, err := appendFrame(nil, v)
	if err != nil {
		t.Fatalf("re-encode of a decoded message: %v", err)
	}
	v2, err := decode(first[frameHeaderLen:])
	if err != nil {
		t.Fatalf("decode of our own encoding: %v", err)
	}
	second, err := appendFrame(nil, v2)
	if err != nil || !bytes.Equal(first, second) {
		t.Fatalf("encoding not stable: %x vs %x (%v)", first, second, err)
	}
}

func fuzzSeeds() map[string]map[string][]byte {
	frame := func(v any) []byte {
		b, err := appendFrame(nil, v)
		if err != nil {
			panic(err)
		}
		return b
	}
	req, resp := frame(fullRequest()), frame(fullResponse())
	get := frame(&Request{Type: MsgGet, Session: 3, Path: "/a"})
	hello := frame(&Request{Type: MsgHello, ProtocolVersion: ProtocolVersion, ClientName: "seed"})
	watch := frame(&Response{Events: []WatchEvent{{Type: EventResync, Rev: 9}}})
	errResp := frame(ErrorResponse(NotLeader("127.0.0.1:7420")))
	deep := append([]byte{0x81, 0xa2, 'z', 'z'}, bytes.Repeat([]byte{0x91}, 100)...)
	deep = append(deep, 0xc0)
	hugeStr := []byte{0x81, 0xa1, 'p', 0xdb, 0x7f, 0xff, 0xff, 0xff, 'a'} // str32 of 2 GiB, 1 byte present
	hugeArr := []byte{0x81, 0xa3, 'o', 'p', 's', 0xdd, 0x7f, 0xff, 0xff, 0xff, 0x80}

	withLen := func(n uint32, rest ...byte) []byte { return append(binary.BigEndian.AppendUint32(nil, n), rest...) }
	return map[string]map[string][]byte{
		"FuzzReadFrame": {
			"request":        req,
			"response":       resp,
			"get":            get,
			"truncated-body": req[:len(req)/2],
			"half-header":    req[:2],
			"huge-length":    withLen(0xFFFFFFFF, 1, 2, 3),
			"max-plus-one":   withLen(fuzzMax+1, 0),
			"zero-length":    withLen(0),
			"two-frames":     append(append([]byte{}, get...), get...),
		},
		"FuzzMuxServer": {
			"calls":          muxInput(&Request{Type: MsgGet, Call: 1, Path: "/a"}, &Request{Type: MsgSet, Call: 2, Path: "/b", Data: []byte("x")}),
			"cancel":         muxInput(&Request{Type: MsgSync, Call: 1}, &Request{Type: MsgCancel, Call: 1}, &Request{Type: MsgCancel, Call: 7}),
			"duplicate":      muxInput(&Request{Type: MsgSync, Call: 3}, &Request{Type: MsgSync, Call: 3}),
			"over-the-limit": muxInput(&Request{Type: MsgSet, Call: 4, Data: make([]byte, 2000)}, &Request{Type: MsgGet, Call: 6}),
			"no-id":          muxInput(&Request{Type: MsgGet}),
			"huge-length":    withLen(0xFFFFFFFF, 1, 2, 3),
		},
		"FuzzDecodeRequest": {
			"full":        req[frameHeaderLen:],
			"get":         get[frameHeaderLen:],
			"hello":       hello[frameHeaderLen:],
			"truncated":   req[frameHeaderLen : len(req)-7],
			"deep":        deep,
			"huge-string": hugeStr,
			"huge-array":  hugeArr,
			"not-a-map":   {0x93, 1, 2, 3},
		},
		"FuzzMsgCodec": {
			"get":        get[frameHeaderLen:],
			"hello":      hello[frameHeaderLen:],
			"full":       req[frameHeaderLen:],
			"not-leader": errResp[frameHeaderLen:],
			"set":        frame(&Request{Type: MsgSet, Call: 300, Session: 1 << 40, Path: "/a/b", Data: []byte("v"), Version: -1})[frameHeaderLen:],
			"set-answer": frame(&Response{Call: 300, Rev: 70000, Stat: namespace.Stat{CreateRev: 5, Mtime: -1, DataLength: 1}})[frameHeaderLen:],
			"granted":    frame(&Response{Lock: LockGranted, Node: "/l/lock-0000000001", Token: 12, Rev: 13})[frameHeaderLen:],
			// A limit beyond int32 and a version beyond int64: refused.
			"overflow": {0x83, 0xa1, 't', 0x08, 0xa3, 'l', 'i', 'm', 0xd3, 0, 0, 0, 1, 0, 0, 0, 0, 0xa1, 'v', 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
			"repeated": {0x82, 0xa1, 't', 0x08, 0xa1, 't', 0x07},
		},
		"FuzzDecodeResponse": {
			"full":        resp[frameHeaderLen:],
			"watch":       watch[frameHeaderLen:],
			"not-leader":  errResp[frameHeaderLen:],
			"truncated":   resp[frameHeaderLen : len(resp)-9],
			"deep":        deep,
			"huge-string": hugeStr,
			"unknown-code": func() []byte {
				return frame(&Response{Code: 4242, Message: "future"})[frameHeaderLen:]
			}(),
		},
	}
}

// TestFuzzSeeds keeps the seed corpus in step with the message types:
// -update rewrites it, otherwise every seed must be present and current.
func TestFuzzSeeds(t *testing.T) {
	for target, seeds := range fuzzSeeds() {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, data := range seeds {
			path := filepath.Join(dir, name)
			want := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(data)))
			if *update {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != want {
				t.Errorf("seed %s missing or stale (run go test ./session -run FuzzSeeds -args -update): %v", path, err)
			}
		}
	}
}
