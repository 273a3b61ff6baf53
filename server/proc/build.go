package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// Build compiles cmd/latchd once per test process and returns the binary's
// path. Call RemoveBuild from TestMain to delete it.
func Build(t TB) string {
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
	dir, err := os.MkdirTemp("", "latchd-build-")
	if err != nil {
		return "", err
	}
	build.dir = dir
	bin := filepath.Join(dir, "latchd")
	return bin, GoBuild("./cmd/latchd", bin)
}

// GoBuild builds the latch module's package pkg (e.g. "./cmd/latchd") into
// the binary out. It must run inside the module's source tree.
func GoBuild(pkg, out string) error {
	root, err := moduleRoot()
	if err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// RemoveBuild deletes the binary Build made, if any.
func RemoveBuild() {
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
}

// moduleRoot is the directory of the latch module's go.mod.
func moduleRoot() (string, error) {
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	modFile := strings.TrimSpace(string(mod))
	if modFile == "" || modFile == os.DevNull {
		return "", fmt.Errorf("not inside the latch module")
	}
	return filepath.Dir(modFile), nil
}
