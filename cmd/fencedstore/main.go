// Command fencedstore is the resource a latch lock protects, in miniature: an
// HTTP key/value store that rejects any read or write whose fencing token is
// lower than the highest it has seen for that key. Tests and `latch chaos`
// write through it and read its history back to check mutual exclusion.
//
//	POST /write {"key","token","client","data"}  -> 200 {record} | 409 {record}
//	POST /read  {"key","token","client"}         -> 200 {record with data} | 409
//	GET  /history                                -> JSON lines, every attempt in decision order
//	GET  /healthz
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7430", "HTTP listen address")
	journal := flag.String("journal", "fencedstore.jsonl", "journal file (JSON lines, fsynced per attempt)")
	ignore := flag.Bool("ignore-tokens", false, "accept every attempt (a deliberately unsafe store, to prove checkers fail)")
	addrFile := flag.String("addr-file", "", "write the bound address here once listening (for harnesses using port 0)")
	flag.Parse()
	if err := run(*addr, *journal, *addrFile, *ignore); err != nil {
		fmt.Fprintln(os.Stderr, "fencedstore:", err)
		os.Exit(1)
	}
}

func run(addr, journal, addrFile string, ignore bool) error {
	st, err := OpenStore(journal, ignore)
	if err != nil {
		return err
	}
	defer st.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if addrFile != "" {
		if err := os.WriteFile(addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			return err
		}
	}
	srv := &http.Server{Handler: Handler(st), ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	slog.Info("fencedstore listening", "addr", ln.Addr().String(), "journal", journal, "ignore_tokens", ignore)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type attempt struct {
	Key    string `json:"key"`
	Token  uint64 `json:"token"`
	Client string `json:"client"`
	Data   string `json:"data"`
}

// Handler serves the store over HTTP.
func Handler(st *Store) http.Handler {
	mux := http.NewServeMux()
	op := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var a attempt
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&a); err != nil {
				http.Error(w, "fencedstore: bad JSON: "+err.Error(), http.StatusBadRequest)
				return
			}
			rec, err := st.Do(name, a.Key, a.Token, a.Client, a.Data)
			status := http.StatusOK
			switch {
			case errors.Is(err, errStale):
				status = http.StatusConflict
			case errors.Is(err, errBadRequest):
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			case err != nil:
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(rec)
		}
	}
	mux.HandleFunc("POST /write", op("write"))
	mux.HandleFunc("POST /read", op("read"))
	mux.HandleFunc("GET /history", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_ = st.WriteHistory(w)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	return mux
}
