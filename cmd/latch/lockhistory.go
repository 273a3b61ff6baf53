package main

import (
	"fmt"
	"io"
	"time"

	"github.com/latch-io/latch/client"
)

// emitHistory prints `latch locks --history`: one line per record, newest
// first.
func (e *env) emitHistory(evs []client.LockEvent) error {
	if evs == nil {
		evs = []client.LockEvent{}
	}
	return e.emit(evs, func(w io.Writer) {
		for _, ev := range evs {
			fmt.Fprintf(w, "%s %s %s token=%d session=%d identity=%s mode=%s",
				time.Unix(0, ev.Time).UTC().Format(time.RFC3339Nano), ev.Path, ev.Event, ev.Token, ev.Session, dash(ev.Identity), ev.Mode)
			if ev.Event != "granted" {
				fmt.Fprintf(w, " held=%s", time.Duration(ev.Time-ev.GrantTime))
			}
			if ev.By != "" {
				fmt.Fprintf(w, " by=%s", ev.By)
			}
			fmt.Fprintln(w)
		}
	})
}
