package raftnode

import "sync"

// Leadership tracks whether this member is a ready leader: raft elected it
// AND a barrier committed in its term, so every entry of earlier terms is
// applied. Only then may it serve linearizable reads or report leadership to
// subscribers (the lease table renews every session on a true).
type Leadership struct {
	mu     sync.Mutex
	ready  bool
	term   uint64        // term in which ready was reached
	readyC chan struct{} // closed when ready becomes true; replaced when it drops
	subs   map[int]chan bool
	nextID int
}

// NewLeadership returns the tracker of a member that does not lead.
func NewLeadership() *Leadership {
	l := &Leadership{}
	l.readyC = make(chan struct{})
	l.subs = map[int]chan bool{}
	return l
}

// Set records a transition (ready in term; false, 0 when lost) and tells
// subscribers.
func (l *Leadership) Set(ready bool, term uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ready == l.ready && term == l.term {
		return
	}
	if l.ready && ready {
		// A new term without an observed step-down: subscribers still
		// need to see the loss, or they keep state from the old term.
		l.publish(false)
	}
	l.ready, l.term = ready, term
	if ready {
		close(l.readyC)
	} else {
		l.readyC = make(chan struct{})
	}
	l.publish(ready)
}

// publish delivers v to every subscriber, replacing an unread older value:
// subscribers want the latest state, not a backlog.
func (l *Leadership) publish(v bool) {
	for _, ch := range l.subs {
		select {
		case <-ch:
		default:
		}
		ch <- v
	}
}

// Get returns whether this member is ready, the term it became ready in,
// and a channel closed once it is ready.
func (l *Leadership) Get() (ready bool, term uint64, readyC <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ready, l.term, l.readyC
}

// Subscribe returns a channel that holds the latest readiness, now and
// after every change, and the cancel that stops delivery.
func (l *Leadership) Subscribe() (<-chan bool, func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan bool, 1)
	ch <- l.ready
	id := l.nextID
	l.nextID++
	l.subs[id] = ch
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.subs, id)
			l.mu.Unlock()
		})
	}
}

// CloseAll tells subscribers leadership is gone for good on Close.
func (l *Leadership) CloseAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ready {
		l.ready = false
		l.readyC = make(chan struct{})
		l.publish(false)
	}
}
