package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// storeHTTP reaches the fencedstore.
var storeHTTP = &http.Client{Timeout: 2 * time.Second}

// storeProc is the fencedstore process.
type storeProc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
}

// startStore starts fencedstore on a free port with its journal in dir.
func startStore(bin, dir string, ignoreTokens bool) (*storeProc, error) {
	addrFile := filepath.Join(dir, "fencedstore.addr")
	os.Remove(addrFile)
	args := []string{"--addr", "127.0.0.1:0", "--addr-file", addrFile, "--journal", filepath.Join(dir, "fencedstore-journal.jsonl")}
	if ignoreTokens {
		args = append(args, "--ignore-tokens")
	}
	logf, err := os.Create(filepath.Join(dir, "fencedstore.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	s := &storeProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(addrFile)
		if err == nil && len(b) > 0 {
			s.addr = string(b)
			if resp, err := storeHTTP.Get("http://" + s.addr + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return s, nil
				}
			}
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("fencedstore exited\n%s", tailFile(filepath.Join(dir, "fencedstore.log"), 20))
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("fencedstore did not come up")
		}
		time.Sleep(20 * time.Millisecond) // polling interval of a condition with a deadline
	}
}

// history fetches GET /history.
func (s *storeProc) history(ctx context.Context) ([]StoreRecord, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+"/history", nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fencedstore /history: %s", resp.Status)
	}
	return decodeLines[StoreRecord](resp.Body, "fencedstore /history")
}

func (s *storeProc) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// tailFile returns the last n lines of a log file, for error messages.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
