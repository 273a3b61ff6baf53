package quicfront

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latch-io/latch/session"
)

// The table of hosts holds only those that failed within the last few
// seconds: a flood from many addresses (IPv6 makes them cheap) is swept
// once their tokens are full again, so it cannot grow without bound.
func TestResumeLimiterForgetsHosts(t *testing.T) {
	var now time.Duration
	l := newResumeLimiter(10, func() time.Duration { return now })
	fail := func(host string) {
		c := &Conn{host: host}
		if err := l.failed(c, 1); !errors.Is(err, session.ErrBadSecret) {
			t.Fatalf("failed() = %v", err)
		}
	}
	for i := range 5000 {
		fail(fmt.Sprintf("2001:db8::%x", i))
	}
	if len(l.hosts) != 5000 {
		t.Fatalf("%d hosts tracked while all of them are within their window", len(l.hosts))
	}
	now += 10 * time.Second // every bucket refills (burst 20 at 10 a second)
	for i := range 5000 {
		fail(fmt.Sprintf("2001:db8:1::%x", i))
		if len(l.hosts) > 2*5000+1 {
			t.Fatalf("%d hosts tracked", len(l.hosts))
		}
	}
	if len(l.hosts) >= 10000 {
		t.Fatalf("the hosts whose tokens refilled were never swept: %d tracked", len(l.hosts))
	}
}
