package store

import (
	"errors"
	"testing"

	"github.com/latch-io/latch/namespace"
)

func TestLimitsValidate(t *testing.T) {
	if err := namespace.DefaultLimits().Validate(); err != nil {
		t.Fatalf("DefaultLimits: %v", err)
	}
	bad := []func(*namespace.Limits){
		func(l *namespace.Limits) { l.MaxPathBytes = 1 },
		func(l *namespace.Limits) { l.MaxDepth = 0 },
		func(l *namespace.Limits) { l.MaxDataBytes = -1 },
		func(l *namespace.Limits) { l.MaxDataBytes = 2 << 20 },
		func(l *namespace.Limits) { l.MaxMultiOps = 0 },
		func(l *namespace.Limits) { l.MaxChildrenPage = 0 },
	}
	for i, f := range bad {
		l := namespace.DefaultLimits()
		f(&l)
		if err := l.Validate(); !errors.Is(err, namespace.ErrBadLimits) {
			t.Errorf("case %d: Validate(%+v) = %v, want ErrBadLimits", i, l, err)
		}
		if _, err := Open(Config{InMemory: true, Limits: l}); !errors.Is(err, namespace.ErrBadConfig) {
			t.Errorf("case %d: Open = %v, want ErrBadConfig", i, err)
		}
	}
	if _, err := Open(Config{}); !errors.Is(err, namespace.ErrBadConfig) {
		t.Errorf("Open without Dir = %v, want ErrBadConfig", err)
	}
}
