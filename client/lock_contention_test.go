package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/server/servertest"
)

// The contention test: many clients, each with its own connection and
// session, take exclusive and shared locks on a small hierarchy
// (/h covers /h/a and /h/b) and act on a fenced store under them. The
// histories are then checked:
//
//   - fencedstore (exclusive holders read-modify-write the keys their
//     lock covers): every attempt was accepted (no holder was fenced off,
//     since nothing failed), and each key's accepted writes count up by
//     one: no two read-modify-writes interleaved;
//   - no two conflicting holds overlap in real time (client view: from
//     Lock's return to Unlock's call, inside the server's hold);
//   - FIFO: among conflicting requests, grants (tokens) follow request
//     revisions; tokens of conflicting holds increase in real time;
//   - porcupine: the acquire/release history is linearizable against a
//     model whose state is the set of holders.
//
// 32 clients run on the two-core CI machine: each does a few operations,
// so the whole test takes a few seconds.
const (
	contenders      = 32
	opsPerContender = 5
)

// lockPaths of the contention test and the store keys each covers.
var lockPaths = []struct {
	path string
	keys []string
}{
	{"/h", []string{"a", "b"}},
	{"/h/a", []string{"a"}},
	{"/h/b", []string{"b"}},
}

// conflict reports whether holds on lock paths i and j conflict.
func conflict(i int, si bool, j int, sj bool) bool {
	if si && sj {
		return false
	}
	return i == j || i == 0 || j == 0
}

// holdRecord is one hold as a contender saw it.
type holdRecord struct {
	client   int
	path     int
	shared   bool
	token    uint64
	rev      uint64
	lockCall int64 // Lock called, ns since start
	granted  int64 // Lock returned
	released int64 // Unlock called
	unlocked int64 // Unlock returned
}

func TestLockContention(t *testing.T) {
	tc := startLockCluster(t, 3)
	store := startFencedstore(t)
	ctx := testCtx(t)
	clients := make([]*Client, contenders)
	for i := range clients {
		clients[i] = tc.dial(5 * time.Second)
	}
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var (
		mu      sync.Mutex
		records []holdRecord
		wg      sync.WaitGroup
		errs    = make(chan error, contenders)
	)
	for id, c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(id), 7))
			for range opsPerContender {
				r := holdRecord{client: id, path: rng.IntN(len(lockPaths)), shared: rng.IntN(3) == 0}
				m := NewRWMutex(c.Session(), lockPaths[r.path].path)
				lock, unlock := m.Lock, m.Unlock
				if r.shared {
					lock, unlock = m.RLock, m.RUnlock
				}
				r.lockCall = now()
				if err := lock(ctx); err != nil {
					errs <- fmt.Errorf("client %d lock %s: %w", id, lockPaths[r.path].path, err)
					return
				}
				r.granted = now()
				r.token, r.rev = m.Token(), m.Revision()
				if !r.shared {
					// Shared holders stay off the store: readers of /h
					// and /h/b hold together with different tokens, and
					// a fenced read moves the key's highest token.
					for _, key := range lockPaths[r.path].keys {
						if err := store.use(key, r.token, id); err != nil {
							unlock(ctx)
							errs <- err
							return
						}
					}
				}
				r.released = now()
				if err := unlock(ctx); err != nil {
					errs <- fmt.Errorf("client %d unlock: %w", id, err)
					return
				}
				r.unlocked = now()
				mu.Lock()
				records = append(records, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	checkFencedHistory(t, store.history(t), records)
	if err := checkHolds(records); err != nil {
		t.Fatal(err)
	}
	checkLockLinearizable(t, records)
	t.Logf("%d holds by %d clients in %v", len(records), contenders, elapsed)
}

// checkFencedHistory: every attempt accepted; each key's accepted writes
// are 1, 2, 3, ... in decision order, and there are as many as exclusive
// holds covering the key.
func checkFencedHistory(t *testing.T, hist []fencedRecord, records []holdRecord) {
	t.Helper()
	next := map[string]int{"a": 1, "b": 1}
	for _, r := range hist {
		if !r.Accepted {
			t.Fatalf("fencedstore refused %+v: a holder acted with a stale token", r)
		}
		if r.Op != "write" {
			continue
		}
		if r.Data != strconv.Itoa(next[r.Key]) {
			t.Fatalf("write %+v: want value %d (read-modify-writes interleaved)", r, next[r.Key])
		}
		next[r.Key]++
	}
	for _, key := range []string{"a", "b"} {
		want := 0
		for _, r := range records {
			if !r.shared && (r.path == 0 || lockPaths[r.path].keys[0] == key) {
				want++
			}
		}
		if next[key]-1 != want {
			t.Fatalf("key %s written %d times, want %d", key, next[key]-1, want)
		}
	}
}

// checkHolds: no real-time overlap of conflicting holds, FIFO grants and
// increasing tokens among conflicting requests.
func checkHolds(records []holdRecord) error {
	for i, x := range records {
		for _, y := range records[i+1:] {
			if !conflict(x.path, x.shared, y.path, y.shared) {
				continue
			}
			switch {
			case x.granted < y.released && y.granted < x.released:
				return fmt.Errorf("conflicting holds overlap:\n%+v\n%+v", x, y)
			case x.token == y.token:
				return fmt.Errorf("conflicting holds share token %d:\n%+v\n%+v", x.token, x, y)
			case (x.rev < y.rev) != (x.token < y.token):
				// FIFO: the earlier request is granted first.
				return fmt.Errorf("grants out of request order:\n%+v\n%+v", x, y)
			case (x.unlocked < y.granted && x.token > y.token) || (y.unlocked < x.granted && y.token > x.token):
				return fmt.Errorf("token went back in time:\n%+v\n%+v", x, y)
			}
		}
	}
	return nil
}

// lockState is the porcupine model's state: what each client holds
// (0: nothing; else 1 + path*2 + shared).
type lockState [contenders]uint8

type lockInput struct {
	client  int
	acquire bool
	path    int
	shared  bool
}

func (in lockInput) code() uint8 {
	c := uint8(1 + in.path*2)
	if in.shared {
		c++
	}
	return c
}

var lockModel = porcupine.Model{
	Init: func() any { return lockState{} },
	Step: func(state, input, _ any) (bool, any) {
		s, in := state.(lockState), input.(lockInput)
		if !in.acquire {
			if s[in.client] != in.code() {
				return false, s
			}
			s[in.client] = 0
			return true, s
		}
		if s[in.client] != 0 {
			return false, s
		}
		for c, held := range s {
			if held != 0 && conflict(int(held-1)/2, (held-1)%2 == 1, in.path, in.shared) && c != in.client {
				return false, s
			}
		}
		s[in.client] = in.code()
		return true, s
	},
	Equal: func(a, b any) bool { return a.(lockState) == b.(lockState) },
	DescribeOperation: func(input, _ any) string {
		in := input.(lockInput)
		return fmt.Sprintf("c%d acquire=%v %s shared=%v", in.client, in.acquire, lockPaths[in.path].path, in.shared)
	},
}

// checkLockLinearizable runs porcupine on the acquire/release history.
func checkLockLinearizable(t *testing.T, records []holdRecord) {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(lockModel, lockOperations(records), 30*time.Second)
	if res != porcupine.Ok {
		path := filepath.Join(t.TempDir(), "locks.html")
		if err := porcupine.VisualizePath(lockModel, info, path); err == nil {
			t.Logf("porcupine visualization: %s", path)
		}
		t.Fatalf("lock history is not linearizable: %v", res)
	}
}

func lockOperations(records []holdRecord) []porcupine.Operation {
	var ops []porcupine.Operation
	for _, r := range records {
		in := lockInput{client: r.client, acquire: true, path: r.path, shared: r.shared}
		ops = append(ops, porcupine.Operation{ClientId: r.client, Input: in, Call: r.lockCall, Return: r.granted})
		in.acquire = false
		ops = append(ops, porcupine.Operation{ClientId: r.client, Input: in, Call: r.released, Return: r.unlocked})
	}
	return ops
}

// The checkers catch what they are for, on hand-made histories.
func TestLockCheckersCatchViolations(t *testing.T) {
	ok := []holdRecord{
		{client: 0, path: 1, token: 10, rev: 10, lockCall: 0, granted: 10, released: 20, unlocked: 25},
		{client: 1, path: 0, token: 30, rev: 12, lockCall: 5, granted: 30, released: 40, unlocked: 45},
		{client: 2, path: 2, shared: true, token: 11, rev: 11, lockCall: 6, granted: 11, released: 28, unlocked: 29},
	}
	if err := checkHolds(ok); err != nil {
		t.Fatal(err)
	}
	if !porcupine.CheckOperations(lockModel, lockOperations(ok)) {
		t.Fatal("porcupine refused a valid history")
	}
	overlap := append([]holdRecord(nil), ok...)
	overlap[1].granted, overlap[1].released = 15, 40 // /h while /h/a is held
	unfair := append([]holdRecord(nil), ok...)
	unfair[1].rev = 5 // requested before /h/a, granted after
	for name, bad := range map[string][]holdRecord{"overlap": overlap, "unfair": unfair} {
		if err := checkHolds(bad); err == nil {
			t.Errorf("%s: checkHolds passed", name)
		}
	}
	// Overlap with /h/a released only after /h was granted: no order of
	// the operations explains it.
	overlap[0].lockCall, overlap[0].granted, overlap[0].released, overlap[0].unlocked = 0, 1, 20, 21
	overlap[1].lockCall, overlap[1].granted = 2, 3
	if porcupine.CheckOperations(lockModel, lockOperations(overlap)) {
		t.Error("porcupine accepted two conflicting holders")
	}
}

// fencedStore is a fencedstore binary running for the test.
type fencedStore struct{ url string }

type fencedRecord struct {
	Seq      uint64 `json:"seq"`
	Op       string `json:"op"`
	Key      string `json:"key"`
	Token    uint64 `json:"token"`
	Data     string `json:"data"`
	Accepted bool   `json:"accepted"`
}

var fencedBuild struct {
	once sync.Once
	dir  string
	err  error
}

// startFencedstore builds cmd/fencedstore (once per test binary; the go
// build cache makes it quick) and runs it on a free port.
func startFencedstore(t *testing.T) *fencedStore {
	t.Helper()
	fencedBuild.once.Do(func() {
		if fencedBuild.dir, fencedBuild.err = os.MkdirTemp("", "fencedstore-build-"); fencedBuild.err == nil {
			fencedBuild.err = proc.GoBuild("./cmd/fencedstore", filepath.Join(fencedBuild.dir, "fencedstore"))
		}
	})
	if fencedBuild.err != nil {
		t.Fatal(fencedBuild.err)
	}
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addr")
	cmd := exec.Command(filepath.Join(fencedBuild.dir, "fencedstore"),
		"--addr", "127.0.0.1:0", "--journal", filepath.Join(dir, "journal.jsonl"), "--addr-file", addrFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		os.RemoveAll(fencedBuild.dir) // rebuilt from the cache if another test needs it
		fencedBuild.once = sync.Once{}
	})
	var addr []byte
	servertest.Eventually(t, "fencedstore listening", func() error {
		var err error
		if addr, err = os.ReadFile(addrFile); err == nil && len(addr) == 0 {
			err = errors.New("no address yet")
		}
		return err
	})
	return &fencedStore{url: "http://" + string(addr)}
}

// use reads key with token and writes the value read plus one: a
// read-modify-write that only mutual exclusion keeps correct.
func (f *fencedStore) use(key string, token uint64, client int) error {
	rec, err := f.do("read", key, token, client, "")
	if err != nil {
		return err
	}
	n := 0
	if rec.Data != "" {
		if n, err = strconv.Atoi(rec.Data); err != nil {
			return err
		}
	}
	_, err = f.do("write", key, token, client, strconv.Itoa(n+1))
	return err
}

func (f *fencedStore) do(op, key string, token uint64, client int, data string) (fencedRecord, error) {
	body, _ := json.Marshal(map[string]any{"key": key, "token": token, "client": strconv.Itoa(client), "data": data})
	resp, err := http.Post(f.url+"/"+op, "application/json", bytes.NewReader(body))
	if err != nil {
		return fencedRecord{}, err
	}
	defer resp.Body.Close()
	var rec fencedRecord
	if err := json.NewDecoder(resp.Body).Decode(&rec); err != nil {
		return rec, fmt.Errorf("fencedstore %s: status %d: %w", op, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return rec, fmt.Errorf("fencedstore refused %s of %s with token %d: status %d", op, key, token, resp.StatusCode)
	}
	return rec, nil
}

// history returns every attempt in decision order.
func (f *fencedStore) history(t *testing.T) []fencedRecord {
	t.Helper()
	resp, err := http.Get(f.url + "/history")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []fencedRecord
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var r fencedRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}
