package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// errStale is a fencedstore refusal: the token is below the highest seen.
var errStale = errors.New("latch: chaos: fencedstore refused a stale token")

// storeClient talks to fencedstore as one worker.
type storeClient struct {
	addr   string
	client string
	http   *http.Client
}

func newStoreClient(addr, client string) *storeClient {
	return &storeClient{addr: addr, client: client, http: &http.Client{Timeout: opTimeout}}
}

// do sends one read or write. A 409 returns the store's record and
// errStale; any other failure leaves the outcome unknown.
func (s *storeClient) do(ctx context.Context, op, key string, token uint64, data string) (StoreRecord, error) {
	body, _ := json.Marshal(map[string]any{"key": key, "token": token, "client": s.client, "data": data})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.addr+"/"+op, bytes.NewReader(body))
	if err != nil {
		return StoreRecord{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return StoreRecord{}, err
	}
	defer resp.Body.Close()
	var rec StoreRecord
	switch resp.StatusCode {
	case http.StatusOK, http.StatusConflict:
		if err := json.NewDecoder(resp.Body).Decode(&rec); err != nil {
			return rec, fmt.Errorf("fencedstore %s: %w", op, err)
		}
		if resp.StatusCode == http.StatusConflict {
			return rec, fmt.Errorf("%w: token %d < %d", errStale, token, rec.Highest)
		}
		return rec, nil
	}
	return rec, fmt.Errorf("fencedstore %s: %s", op, resp.Status)
}

// storeOp runs one fencedstore operation and records it: ok when
// accepted, fail (status "stale") when refused, unknown otherwise.
func (w *worker) storeOp(ctx context.Context, op, key string, token uint64, data string) (StoreRecord, error) {
	hop := OpStoreRead
	if op == "write" {
		hop = OpStoreWrite
	}
	id, err := w.h.Invoke(hop, Args{Key: key, Value: data}, token, w.s.ID())
	if err != nil {
		return StoreRecord{}, fmt.Errorf("%w: %v", errHistory, err)
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	rec, err := w.fenced.do(octx, op, key, token, data)
	cancel()
	outcome, res := OutcomeOK, Result{Value: rec.Data}
	switch {
	case errors.Is(err, errStale):
		outcome, res = OutcomeFail, Result{Status: "stale"}
	case err != nil:
		outcome = OutcomeUnknown
	}
	if herr := w.h.Complete(id, outcome, res, 0, 0, err); herr != nil {
		return rec, fmt.Errorf("%w: %v", errHistory, herr)
	}
	return rec, err
}
