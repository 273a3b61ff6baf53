package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// Build compiles cmd/latchd once per test process and returns the binary's
// path. Call RemoveBuild from TestMain to delete it.
func Build(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		build.bin, build.err = buildLatchd()
	})
	if build.err != nil {
		t.Fatalf("proc: build latchd: %v", build.err)
	}
	return build.bin
}

func buildLatchd() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the latch module")
	}
	dir, err := os.MkdirTemp("", "latchd-build-")
	if err != nil {
		return "", err
	}
	build.dir = dir
	bin := filepath.Join(dir, "latchd")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/latchd")
	cmd.Dir = filepath.Dir(mod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// RemoveBuild deletes the binary Build made, if any.
func RemoveBuild() {
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
}
