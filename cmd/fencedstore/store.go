package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// Store is the protected resource: a tiny key/value store that accepts an
// operation only when its fencing token is at least the highest token it has
// seen for that key. Reads take a token too, so a holder that reads a value
// fences off every older holder before it writes (read-modify-write stays
// safe even when an old holder wakes up late).
//
// Every attempt, accepted or not, is appended to a JSON-lines journal and
// fsynced before the answer, so the history survives a crash and checkers
// can read it back with History.
type Store struct {
	mu           sync.Mutex
	journal      *os.File
	ignoreTokens bool // --ignore-tokens: a deliberately broken store, to prove checkers fail
	highest      map[string]uint64
	values       map[string]string
	history      []Record
}

// Record is one attempt as the store saw it, in the order it decided them.
type Record struct {
	Seq      uint64 `json:"seq"`
	Op       string `json:"op"` // "read" or "write"
	Key      string `json:"key"`
	Token    uint64 `json:"token"`
	Client   string `json:"client"`
	Data     string `json:"data,omitempty"`
	Accepted bool   `json:"accepted"`
	Highest  uint64 `json:"highest"` // highest token seen for the key before this attempt
}

var (
	errBadRequest = errors.New("fencedstore: bad request")
	errStale      = errors.New("fencedstore: stale fencing token")
)

// OpenStore opens (or creates) the journal at path and replays it.
func OpenStore(path string, ignoreTokens bool) (*Store, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	s := &Store{journal: f, ignoreTokens: ignoreTokens, highest: map[string]uint64{}, values: map[string]string{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			// A torn last line from a crash mid-append: the attempt was never
			// acknowledged, so dropping it loses nothing.
			break
		}
		s.remember(r)
	}
	return s, nil
}

func (s *Store) remember(r Record) {
	s.history = append(s.history, r)
	if !r.Accepted {
		return
	}
	if r.Token > s.highest[r.Key] {
		s.highest[r.Key] = r.Token
	}
	if r.Op == "write" {
		s.values[r.Key] = r.Data
	}
}

// Do decides one attempt, journals it, and returns the record.
func (s *Store) Do(op, key string, token uint64, client, data string) (Record, error) {
	if key == "" || (op != "read" && op != "write") {
		return Record{}, fmt.Errorf("%w: need op read|write and a key", errBadRequest)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := Record{
		Seq: uint64(len(s.history)) + 1, Op: op, Key: key, Token: token,
		Client: client, Data: data, Highest: s.highest[key],
	}
	r.Accepted = s.ignoreTokens || token >= r.Highest
	if op == "read" && r.Accepted {
		r.Data = s.values[key]
	}
	line, err := json.Marshal(r)
	if err != nil {
		return Record{}, err
	}
	if _, err := s.journal.Write(append(line, '\n')); err != nil {
		return Record{}, err
	}
	if err := s.journal.Sync(); err != nil {
		return Record{}, err
	}
	s.remember(r)
	if !r.Accepted {
		return r, fmt.Errorf("%w: token %d < highest %d for %q", errStale, token, r.Highest, key)
	}
	return r, nil
}

// WriteHistory writes every record as JSON lines.
func (s *Store) WriteHistory(w io.Writer) error {
	s.mu.Lock()
	hist := append([]Record(nil), s.history...)
	s.mu.Unlock()
	enc := json.NewEncoder(w)
	for _, r := range hist {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the journal.
func (s *Store) Close() error { return s.journal.Close() }
