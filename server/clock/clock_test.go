package clock

import (
	"testing"
	"time"
)

// fake is a wall clock and a monotonic clock the test moves, counting the
// wall clock's reads.
type fake struct {
	wall      time.Time
	mono      time.Duration
	wallReads int
}

func (f *fake) readWall() time.Time            { f.wallReads++; return f.wall }
func (f *fake) readMono() time.Duration        { return f.mono }
func (f *fake) advance(d time.Duration)        { f.wall, f.mono = f.wall.Add(d), f.mono+d }
func (f *fake) stepWall(d time.Duration)       { f.wall = f.wall.Add(d) }
func (f *fake) clock(committed int64) *Cluster { return New(f.readWall, f.readMono, committed) }

// A cluster with no time yet reads the wall clock once, for its first
// stamp; from then on only elapsed monotonic time moves it, so wall-clock
// steps either way change nothing.
func TestClusterReadsWallOnce(t *testing.T) {
	f := &fake{wall: time.Unix(1000, 0), mono: 5 * time.Second}
	c := f.clock(0)
	if got, want := c.Now(), time.Unix(1000, 0).UnixNano(); got != want {
		t.Fatalf("first Now = %d, want the wall clock %d", got, want)
	}
	f.advance(2 * time.Second)
	f.stepWall(-time.Hour)
	if got, want := c.Now(), time.Unix(1002, 0).UnixNano(); got != want {
		t.Fatalf("Now after 2s and a wall step back = %d, want %d", got, want)
	}
	f.stepWall(2 * time.Hour)
	f.advance(time.Second)
	if got, want := c.Now(), time.Unix(1003, 0).UnixNano(); got != want {
		t.Fatalf("Now after a wall step forward and 1s = %d, want %d", got, want)
	}
	if f.wallReads != 1 {
		t.Fatalf("the wall clock was read %d times, want once", f.wallReads)
	}
}

// A member that applied a committed time goes on from it and never reads
// the wall clock; Observe moves the clock forward to the log, never back.
func TestClusterFollowsTheLog(t *testing.T) {
	f := &fake{wall: time.Unix(5000, 0)}
	base := time.Unix(2000, 0).UnixNano()
	c := f.clock(base)
	f.advance(time.Second)
	if got, want := c.Now(), base+int64(time.Second); got != want {
		t.Fatalf("Now = %d, want the committed time plus 1s, %d", got, want)
	}
	ahead := base + int64(10*time.Second)
	c.Observe(ahead) // a leader whose clock ran ahead of ours
	if got := c.Now(); got != ahead {
		t.Fatalf("Now after observing a later time = %d, want %d", got, ahead)
	}
	c.Observe(base) // an older entry applied late
	f.advance(time.Second)
	if got, want := c.Now(), ahead+int64(time.Second); got != want {
		t.Fatalf("Now after observing an older time = %d, want %d (never back)", got, want)
	}
	if f.wallReads != 0 {
		t.Fatalf("the wall clock was read %d times with a committed time known", f.wallReads)
	}
}

// Mono's times differ by what the monotonic clock moved, whatever the wall
// clock does.
func TestMono(t *testing.T) {
	f := &fake{mono: time.Minute}
	m := Mono(f.readMono)
	t0 := m.Now()
	f.advance(1500 * time.Millisecond)
	f.stepWall(-24 * time.Hour)
	if d := m.Now().Sub(t0); d != 1500*time.Millisecond {
		t.Fatalf("Mono moved %v, want 1.5s", d)
	}
}
