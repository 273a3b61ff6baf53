package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/latch-io/latch/server/proc"
)

// findBinary returns the program name to run, looking where an installed
// latch expects it: beside the running latch executable (go install puts
// latch, latchd and fencedstore in one bin folder), then, inside a latch
// source checkout, a fresh build of pkg into dir, then on PATH. When all
// fail the error says every place it looked.
// self is the running executable ("" when unknown).
func findBinary(self, name, pkg, dir string, progress func(string, ...any)) (string, error) {
	var looked []string
	if self != "" {
		beside := filepath.Join(filepath.Dir(self), name)
		if isExecutable(beside) {
			return beside, nil
		}
		looked = append(looked, "beside latch ("+beside+")")
	}
	out := filepath.Join(dir, name)
	progress("%s not beside latch: building %s", name, pkg)
	err := proc.GoBuild(pkg, out)
	if err == nil {
		return out, nil
	}
	looked = append(looked, fmt.Sprintf("a build from a source checkout (%v)", firstLine(err)))
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	looked = append(looked, "on PATH")
	return "", fmt.Errorf("cannot find %s: looked %s; install it (go install github.com/latch-io/latch/%s@latest) or pass --%s-bin",
		name, strings.Join(looked, ", "), strings.TrimPrefix(pkg, "./"), name)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
