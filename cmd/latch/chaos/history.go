package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"
)

// Operation kinds recorded by workers. Operations have an invoke and a
// complete record; events (the last group) are one record.
const (
	OpSessionOpen  = "session-open"  // Session set on completion
	OpSessionClose = "session-close" // the worker ends its session on purpose
	OpKVGet        = "kv-get"
	OpKVCreate     = "kv-create"
	OpKVSet        = "kv-set"
	OpKVDelete     = "kv-delete"
	OpAcquire      = "lock-acquire" // Args.Key lock path, Args.Mode; Token on completion
	OpRelease      = "lock-release"
	OpStoreRead    = "store-read"  // Args.Key store key; Token; Result.Value
	OpStoreWrite   = "store-write" // Args.Value written
	OpCampaign     = "campaign"    // Token = term on completion
	OpResign       = "resign"

	EvSessionState = "session-state" // Result.State: connected, jeopardy, reconnected, expired
	EvLockLost     = "lock-lost"     // Token of the lock (or election term) whose Lost() closed
)

// Txns on one key, in the kv workload: kv-txn-cas is "if value =
// Args.Expect then set Args.Value" (Result.Succeeded, Version of the
// set); kv-txn-create is "if absent then create Args.Value else get"
// (Result.Succeeded; the else branch's read in Value, Version).
const (
	OpKVTxnCAS    = "kv-txn-cas"
	OpKVTxnCreate = "kv-txn-create"
)

// Outcomes of an operation.
const (
	OutcomeOK      = "ok"
	OutcomeFail    = "fail"    // definitely not applied (or a read that returned nothing)
	OutcomeUnknown = "unknown" // may or may not have been applied
)

// Phases of a history record.
const (
	PhaseInvoke   = "invoke"
	PhaseComplete = "complete"
	PhaseEvent    = "event"
)

// AnyVersion in Args.Version means "no version check".
const AnyVersion int64 = -1

// Args are an operation's arguments.
type Args struct {
	Key     string `json:"key,omitempty"` // kv path, lock path or store key
	Value   string `json:"value,omitempty"`
	Version int64  `json:"version,omitempty"` // kv-set/kv-delete expected version; AnyVersion for none
	Mode    string `json:"mode,omitempty"`    // exclusive or shared
	Expect  string `json:"expect,omitempty"`  // kv-txn-cas: the value compared
}

// Result is what an operation returned.
type Result struct {
	Value   string `json:"value,omitempty"`
	Version int64  `json:"version,omitempty"`
	Exists  bool   `json:"exists,omitempty"`
	// Status names a definite failure: nonode, exists, badversion, stale.
	Status string `json:"status,omitempty"`
	State  string `json:"state,omitempty"` // session-state events
	// Succeeded: a txn's compares held and its then branch ran.
	Succeeded bool `json:"succeeded,omitempty"`
}

// Record is one line of a worker's history file.
type Record struct {
	Seq     uint64  `json:"seq"` // program order within the file
	Worker  string  `json:"worker"`
	Phase   string  `json:"phase"`
	ID      uint64  `json:"id,omitempty"` // complete: the Seq of its invoke
	Op      string  `json:"op,omitempty"`
	Args    *Args   `json:"args,omitempty"`
	Time    int64   `json:"time"` // unix nanoseconds, the worker's clock
	Outcome string  `json:"outcome,omitempty"`
	Result  *Result `json:"result,omitempty"`
	Token   uint64  `json:"token,omitempty"`
	Session uint64  `json:"session,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// Op is one operation (or event) of the merged history: an invoke record
// joined with its completion.
type Op struct {
	Worker string `json:"worker"`
	ID     uint64 `json:"id"` // Seq of the invoke (or event) record in its worker's file
	Op     string `json:"op"`
	Args   Args   `json:"args"`
	Invoke int64  `json:"invoke"`
	// Complete is when the worker learned the outcome; 0 when it never
	// did (killed mid-operation): such an operation is unknown.
	Complete int64  `json:"complete"`
	Outcome  string `json:"outcome"`
	Result   Result `json:"result"`
	Token    uint64 `json:"token,omitempty"`
	Session  uint64 `json:"session,omitempty"`
	Error    string `json:"error,omitempty"`
}

// IsEvent reports whether o is a one-record event.
func (o *Op) IsEvent() bool {
	switch o.Op {
	case EvSessionState, EvLockLost:
		return true
	}
	return false
}

// History appends a worker's records to its file. Each record is one
// write(2) of one line straight to the file, done before the worker acts
// on what it records: a SIGKILL cannot lose a record the worker went on
// from, because the kernel holds it once write returns (only a machine
// crash could, and the runner never crashes the machine).
type History struct {
	mu     sync.Mutex
	f      *os.File
	worker string
	seq    uint64
	now    func() time.Time
}

// CreateHistory opens (creating or appending to) the history file path of
// worker.
func CreateHistory(path, worker string) (*History, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &History{f: f, worker: worker, now: time.Now}, nil
}

func (h *History) write(r Record) (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	r.Seq, r.Worker = h.seq, h.worker
	if r.Time == 0 {
		r.Time = h.now().UnixNano()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	if _, err := h.f.Write(append(b, '\n')); err != nil {
		return 0, fmt.Errorf("latch: chaos: history: %w", err)
	}
	return r.Seq, nil
}

// Invoke records that op is about to be sent and returns its id for
// Complete.
func (h *History) Invoke(op string, args Args, token, session uint64) (uint64, error) {
	return h.write(Record{Phase: PhaseInvoke, Op: op, Args: &args, Token: token, Session: session})
}

// Complete records op id's outcome. token and session, when not 0,
// override the invoke's (a grant's token is learned on completion).
func (h *History) Complete(id uint64, outcome string, res Result, token, session uint64, err error) error {
	r := Record{Phase: PhaseComplete, ID: id, Outcome: outcome, Token: token, Session: session}
	if res != (Result{}) {
		r.Result = &res
	}
	if err != nil {
		r.Error = err.Error()
	}
	_, werr := h.write(r)
	return werr
}

// Event records a one-record event.
func (h *History) Event(op string, res Result, token, session uint64) error {
	r := Record{Phase: PhaseEvent, Op: op, Token: token, Session: session, Outcome: OutcomeOK}
	if res != (Result{}) {
		r.Result = &res
	}
	_, err := h.write(r)
	return err
}

// Close closes the file.
func (h *History) Close() error { return h.f.Close() }

// ReadHistory reads one worker's history file and joins invokes with
// completions. An invoke with no completion is unknown with Complete 0.
// A torn last line (the worker was killed mid-write) is dropped: its
// operation was never acted on.
func ReadHistory(r io.Reader) ([]Op, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var ops []Op
	index := map[uint64]int{} // invoke seq -> position in ops
	var torn error
	line := 0
	for sc.Scan() {
		line++
		if torn != nil {
			return nil, torn // a bad line that was not the last
		}
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			torn = fmt.Errorf("%w: line %d: %v", ErrBadHistory, line, err)
			continue
		}
		switch rec.Phase {
		case PhaseInvoke, PhaseEvent:
			o := Op{Worker: rec.Worker, ID: rec.Seq, Op: rec.Op, Invoke: rec.Time, Outcome: OutcomeUnknown,
				Token: rec.Token, Session: rec.Session}
			if rec.Args != nil {
				o.Args = *rec.Args
			}
			if rec.Phase == PhaseEvent {
				o.Complete, o.Outcome = rec.Time, OutcomeOK
				if rec.Result != nil {
					o.Result = *rec.Result
				}
			}
			index[rec.Seq] = len(ops)
			ops = append(ops, o)
		case PhaseComplete:
			i, ok := index[rec.ID]
			if !ok {
				return nil, fmt.Errorf("%w: line %d: completion of unknown operation %d", ErrBadHistory, line, rec.ID)
			}
			o := &ops[i]
			o.Complete, o.Outcome, o.Error = rec.Time, rec.Outcome, rec.Error
			if rec.Result != nil {
				o.Result = *rec.Result
			}
			if rec.Token != 0 {
				o.Token = rec.Token
			}
			if rec.Session != 0 {
				o.Session = rec.Session
			}
		default:
			return nil, fmt.Errorf("%w: line %d: phase %q", ErrBadHistory, line, rec.Phase)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return ops, nil
}

// ReadHistoryFiles reads and concatenates the history files at paths.
func ReadHistoryFiles(paths ...string) ([]Op, error) {
	var all []Op
	for _, p := range paths {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // a worker killed before it wrote anything
		}
		if err != nil {
			return nil, err
		}
		ops, err := ReadHistory(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		all = append(all, ops...)
	}
	sortOps(all)
	return all, nil
}

// sortOps orders ops by invoke time, then worker and id, for reports and
// checkers that read them in time order.
func sortOps(ops []Op) {
	sort.SliceStable(ops, func(i, j int) bool {
		if ops[i].Invoke != ops[j].Invoke {
			return ops[i].Invoke < ops[j].Invoke
		}
		if ops[i].Worker != ops[j].Worker {
			return ops[i].Worker < ops[j].Worker
		}
		return ops[i].ID < ops[j].ID
	})
}

// WriteOps writes ops as JSON lines (the merged history of a run).
func WriteOps(w io.Writer, ops []Op) error {
	enc := json.NewEncoder(w)
	for i := range ops {
		if err := enc.Encode(&ops[i]); err != nil {
			return err
		}
	}
	return nil
}
