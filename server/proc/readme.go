package proc

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sync"
)

// READMEBlock returns the fenced code block in language lang ("sh",
// "python") that follows the line <!-- marker --> in the module's
// README.md, for tests that run the README's examples as written.
func READMEBlock(t TB, marker, lang string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("proc: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatalf("proc: %v", err)
	}
	re := regexp.MustCompile("(?s)<!-- " + regexp.QuoteMeta(marker) + " -->\\s*```" + regexp.QuoteMeta(lang) + "\n(.*?)```")
	m := re.FindSubmatch(b)
	if m == nil {
		t.Fatalf("README has no %s block after <!-- %s -->", lang, marker)
	}
	return string(m[1])
}

// Output collects what a process writes while the test reads it: a
// bytes.Buffer safe for both at once.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
