package store

// lockSet is an ordered set of lock requests by a two-part key: the runnable
// requests and each path's subtree frontiers by revision, the timers by
// (time, revision). It is a treap whose priorities are a hash of the key, so
// the same contents always have the same shape and every operation is
// O(log n) expected, independent of insertion order.
type lockSet struct {
	root *setNode
	n    int
}

type setKey struct{ a, b uint64 }

func (k setKey) less(o setKey) bool { return k.a < o.a || (k.a == o.a && k.b < o.b) }

type setNode struct {
	key         setKey
	prio        uint64
	req         *lockReq
	left, right *setNode
}

// revKey orders by revision.
func revKey(rev uint64) setKey { return setKey{a: rev} }

// timeKey orders by time, then revision; flipping the sign bit keeps signed
// times in order as unsigned keys.
func timeKey(t int64, rev uint64) setKey { return setKey{a: uint64(t) ^ (1 << 63), b: rev} }

func keyTime(k setKey) int64 { return int64(k.a ^ (1 << 63)) }

// splitmix64 spreads keys into priorities.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (s *lockSet) len() int { return s.n }

// insert adds key; the key must not be present.
func (s *lockSet) insert(k setKey, r *lockReq) {
	l, rt := split(s.root, k)
	n := &setNode{key: k, prio: splitmix64(k.a ^ splitmix64(k.b)), req: r}
	s.root = merge(merge(l, n), rt)
	s.n++
}

// delete removes key; it reports whether it was present.
func (s *lockSet) delete(k setKey) bool {
	p := &s.root
	for *p != nil {
		n := *p
		switch {
		case k.less(n.key):
			p = &n.left
		case n.key.less(k):
			p = &n.right
		default:
			*p = merge(n.left, n.right)
			s.n--
			return true
		}
	}
	return false
}

// min returns the smallest entry, or ok false when the set is empty.
func (s *lockSet) min() (k setKey, r *lockReq, ok bool) {
	n := s.root
	if n == nil {
		return setKey{}, nil, false
	}
	for n.left != nil {
		n = n.left
	}
	return n.key, n.req, true
}

// ascend calls fn for the entries with keys after from, in order, until fn
// returns false.
func (s *lockSet) ascend(from setKey, fn func(setKey, *lockReq) bool) {
	ascend(s.root, from, fn)
}

func ascend(n *setNode, from setKey, fn func(setKey, *lockReq) bool) bool {
	for n != nil {
		if !from.less(n.key) {
			n = n.right // n and its left subtree are at or before from
			continue
		}
		if !ascend(n.left, from, fn) || !fn(n.key, n.req) {
			return false
		}
		n = n.right
	}
	return true
}

// split divides n into keys before k and keys at or after k.
func split(n *setNode, k setKey) (l, r *setNode) {
	if n == nil {
		return nil, nil
	}
	if n.key.less(k) {
		n.right, r = split(n.right, k)
		return n, r
	}
	l, n.left = split(n.left, k)
	return l, n
}

// merge joins two treaps whose keys are all ordered l before r.
func merge(l, r *setNode) *setNode {
	switch {
	case l == nil:
		return r
	case r == nil:
		return l
	case l.prio > r.prio:
		l.right = merge(l.right, r)
		return l
	default:
		r.left = merge(l, r.left)
		return r
	}
}
