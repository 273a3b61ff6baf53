package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Files a run writes under Config.Out. The checkers read only these, so a
// run's out directory can be checked again later (see LoadEvidence).
const (
	FileFaults      = "faults.jsonl"      // FaultRecord lines
	FileWorkers     = "workers.json"      // []WorkerInfo
	FileSessions    = "sessions.jsonl"    // SessionPoll lines
	FileStore       = "fencedstore.jsonl" // the store's journal: StoreRecord lines
	FileFinal       = "final.jsonl"       // history of the final reads
	FileParams      = "params.json"       // Params
	FileHistory     = "history.jsonl"     // merged history of every worker (Op lines)
	FileReport      = "report.json"
	FileReportText  = "report.txt"
	FilePorcupine   = "kv-linearizability.html"
	DirWorkers      = "workers"
	finalWorkerName = "final"
)

// StoreRecord is one attempt in fencedstore's history (GET /history), in
// the order the store decided them.
type StoreRecord struct {
	Seq      uint64 `json:"seq"`
	Op       string `json:"op"` // read or write
	Key      string `json:"key"`
	Token    uint64 `json:"token"`
	Client   string `json:"client"`
	Data     string `json:"data,omitempty"`
	Accepted bool   `json:"accepted"`
	Highest  uint64 `json:"highest"`
}

// FaultRecord is one line of faults.jsonl.
type FaultRecord struct {
	Time   int64     `json:"time"` // unix nanoseconds
	Kind   FaultKind `json:"kind"`
	Phase  string    `json:"phase"` // start, end
	Target []string  `json:"target,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// Interval is a span of unix-nanosecond times; End 0 means open.
type Interval struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// WorkerInfo is the orchestrator's record of one worker process.
type WorkerInfo struct {
	ID      string     `json:"id"`
	Role    string     `json:"role"`
	Buggy   bool       `json:"buggy,omitempty"`
	PID     int        `json:"pid"`
	Started int64      `json:"started"`
	Exited  int64      `json:"exited,omitempty"`
	Killed  int64      `json:"killed,omitempty"` // when SIGKILL was sent
	Pauses  []Interval `json:"pauses,omitempty"` // SIGSTOP..SIGCONT
	History string     `json:"history"`          // file name under DirWorkers
}

// pausedDuring reports whether w was stopped at any time in [from, to].
func (w *WorkerInfo) pausedDuring(from, to int64) bool {
	for _, p := range w.Pauses {
		end := p.End
		if end == 0 {
			end = to
		}
		if p.Start <= to && end >= from {
			return true
		}
	}
	return false
}

// SessionPoll is one successful listing of the cluster's sessions.
type SessionPoll struct {
	Time int64    `json:"time"`
	IDs  []uint64 `json:"ids"`
}

// Params are the run's settings the checkers need.
type Params struct {
	SessionTTL      time.Duration `json:"session_ttl"`
	LockDelay       time.Duration `json:"lock_delay"`
	PollInterval    time.Duration `json:"poll_interval"`
	ElectionTimeout time.Duration `json:"election_timeout"`
	Workloads       []string      `json:"workloads"`
	Rogue           bool          `json:"rogue,omitempty"`
	Start           int64         `json:"start"` // unix nanoseconds
	End             int64         `json:"end"`
}

// Evidence is everything the checkers judge.
type Evidence struct {
	Params   Params
	Ops      []Op // every worker's history, by invoke time
	Final    []Op // the final reads of the kv keys
	Store    []StoreRecord
	Faults   []FaultRecord
	Workers  []WorkerInfo
	Sessions []SessionPoll
}

// worker returns the info of worker id, or nil.
func (ev *Evidence) worker(id string) *WorkerInfo {
	for i := range ev.Workers {
		if ev.Workers[i].ID == id {
			return &ev.Workers[i]
		}
	}
	return nil
}

// LoadEvidence reads the files a run wrote to dir.
func LoadEvidence(dir string) (*Evidence, error) {
	ev := &Evidence{}
	if err := readJSON(filepath.Join(dir, FileParams), &ev.Params); err != nil {
		return nil, err
	}
	if err := readJSON(filepath.Join(dir, FileWorkers), &ev.Workers); err != nil {
		return nil, err
	}
	var paths []string
	for _, w := range ev.Workers {
		paths = append(paths, filepath.Join(dir, DirWorkers, w.History))
	}
	var err error
	if ev.Ops, err = ReadHistoryFiles(paths...); err != nil {
		return nil, err
	}
	if ev.Final, err = ReadHistoryFiles(filepath.Join(dir, FileFinal)); err != nil {
		return nil, err
	}
	if ev.Store, err = readLines[StoreRecord](filepath.Join(dir, FileStore)); err != nil {
		return nil, err
	}
	if ev.Faults, err = readLines[FaultRecord](filepath.Join(dir, FileFaults)); err != nil {
		return nil, err
	}
	if ev.Sessions, err = readLines[SessionPoll](filepath.Join(dir, FileSessions)); err != nil {
		return nil, err
	}
	return ev, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadHistory, path, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// readLines reads a JSON-lines file; a missing file is empty and a torn
// last line is dropped.
func readLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return decodeLines[T](f, path)
}

func decodeLines[T any](r io.Reader, name string) ([]T, error) {
	var out []T
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var torn error
	for n := 1; sc.Scan(); n++ {
		if torn != nil {
			return nil, torn
		}
		if len(sc.Bytes()) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			torn = fmt.Errorf("%w: %s line %d: %v", ErrBadHistory, name, n, err)
			continue
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// appendLine appends v as one JSON line to f in one write.
func appendLine(f *os.File, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	return err
}
