package raftnode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter routes hashicorp/raft's hclog output into slog, so a member
// writes one structured log stream. Levels map one to one, with trace below
// slog's debug.
type hclogAdapter struct {
	l       *slog.Logger
	name    string
	implied []any
	level   *atomic.Int32 // hclog.Level; shared by every logger derived from one root
}

const levelTrace = slog.LevelDebug - 4

// NewHCLog returns an hclog.Logger (what hashicorp/raft, its log store
// and its snapshot store take) writing to l, its records tagged
// component=name.
func NewHCLog(l *slog.Logger, name string) hclog.Logger {
	lv := new(atomic.Int32)
	lv.Store(int32(hclog.Trace))
	return &hclogAdapter{l: l.With("component", name), name: name, level: lv}
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func toSlogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return levelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (a *hclogAdapter) enabled(level hclog.Level) bool {
	if level < hclog.Level(a.level.Load()) {
		return false
	}
	return a.l.Enabled(context.Background(), toSlogLevel(level))
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || !a.enabled(level) {
		return
	}
	a.l.Log(context.Background(), toSlogLevel(level), msg, formatArgs(args)...)
}

// formatArgs renders hclog.Fmt values, which slog would print as a raw
// slice.
func formatArgs(args []any) []any {
	var out []any // a copy, made only when something changes
	for i, v := range args {
		f, ok := v.(hclog.Format)
		if !ok || len(f) == 0 {
			continue
		}
		format, ok := f[0].(string)
		if !ok {
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = fmt.Sprintf(format, f[1:]...)
	}
	if out == nil {
		return args
	}
	return out
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.implied }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.l = a.l.With(args...)
	c.implied = append(append([]any(nil), a.implied...), args...)
	return &c
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return a.ResetNamed(name)
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	c.l = a.l.With("subsystem", name)
	return &c
}

func (a *hclogAdapter) SetLevel(level hclog.Level) { a.level.Store(int32(level)) }
func (a *hclogAdapter) GetLevel() hclog.Level      { return hclog.Level(a.level.Load()) }

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	w := &stdWriter{a: a, level: hclog.Info}
	if opts != nil {
		w.infer = opts.InferLevels || opts.InferLevelsWithTimestamp
		if opts.ForceLevel != hclog.NoLevel {
			w.level = opts.ForceLevel
		}
	}
	return w
}

// stdWriter turns lines written by a standard library logger into records,
// reading "[WARN]"-style prefixes when asked to infer levels.
type stdWriter struct {
	a     *hclogAdapter
	level hclog.Level
	infer bool
}

func (w *stdWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte{'\n'}) {
		msg, level := string(line), w.level
		if w.infer {
			msg, level = inferLevel(msg, level)
		}
		w.a.Log(level, msg)
	}
	return len(p), nil
}

func inferLevel(msg string, def hclog.Level) (string, hclog.Level) {
	for _, p := range []struct {
		tag   string
		level hclog.Level
	}{{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info},
		{"[WARN]", hclog.Warn}, {"[ERR]", hclog.Error}, {"[ERROR]", hclog.Error}} {
		if i := strings.Index(msg, p.tag); i >= 0 {
			return strings.TrimSpace(msg[i+len(p.tag):]), p.level
		}
	}
	return msg, def
}
