package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindBinaryBesideLatch(t *testing.T) {
	dir := t.TempDir()
	want := filepath.Join(dir, "latchd")
	if err := os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := findBinary(filepath.Join(dir, "latch"), "latchd", "./cmd/latchd", t.TempDir(), t.Logf)
	if err != nil || got != want {
		t.Fatalf("findBinary = %q, %v; want %q", got, err, want)
	}
}

func TestFindBinaryOnPath(t *testing.T) {
	bin := t.TempDir()
	want := filepath.Join(bin, "fencedstore")
	if err := os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	// No go on PATH: the checkout build fails, so PATH is the answer.
	got, err := findBinary(filepath.Join(t.TempDir(), "latch"), "fencedstore", "./cmd/fencedstore", t.TempDir(), t.Logf)
	if err != nil || got != want {
		t.Fatalf("findBinary = %q, %v; want %q", got, err, want)
	}
}

func TestFindBinaryNowhereSaysWhereItLooked(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	self := filepath.Join(t.TempDir(), "latch")
	_, err := findBinary(self, "latchd", "./cmd/latchd", t.TempDir(), t.Logf)
	if err == nil {
		t.Fatal("found a latchd that does not exist")
	}
	for _, want := range []string{filepath.Join(filepath.Dir(self), "latchd"), "source checkout", "on PATH", "--latchd-bin", "go install"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
