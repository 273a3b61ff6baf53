package store

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/latch-io/latch/namespace"
)

// dumpDataMax is the longest data Dump prints in full; longer data is
// printed as its length and a hash prefix.
const dumpDataMax = 64

// Dump writes a canonical, human-readable listing of the whole state: meta,
// the tree depth first with stats and data, sessions with their ephemerals,
// members, and lock requests. Two stores with the same state write the same
// bytes.
func (s *Store) Dump(w io.Writer) error {
	bw := bufio.NewWriter(w)
	err := s.view(func(txn *badger.Txn) error {
		applied, err := readUint64(txn, metaApplied)
		if err != nil {
			return err
		}
		clock, err := readUint64(txn, metaClock)
		if err != nil {
			return err
		}
		fmt.Fprintf(bw, "applied=%d clock=%d\n", applied, int64(clock))
		if v, ok, err := getValue(txn, metaLimits); err != nil {
			return err
		} else if ok {
			r, err := decodeLimitsRecord(v)
			if err != nil {
				return err
			}
			fmt.Fprintf(bw, "limits rev=%d %+v\n", r.Rev, r.Limits)
		}
		root, err := readNode(txn, "/")
		if err != nil {
			return err
		}
		if err := dumpTree(bw, txn, "/", root); err != nil {
			return err
		}
		err = scan(txn, []byte{spaceSession}, func(k, v []byte) error {
			si, err := decodeSession(beUint64(k[1:]), v)
			if err != nil {
				return err
			}
			host := ""
			if si.Host != "" {
				host = fmt.Sprintf(" host=%q", si.Host)
			}
			fmt.Fprintf(bw, "session %d ttl=%dms opened=%d identity=%q%s secret=%x\n",
				si.ID, si.TTLMillis, si.OpenTime, si.Identity, host, si.Secret)
			prefix := ephemeralPrefix(si.ID)
			return scan(txn, prefix, func(k, _ []byte) error {
				fmt.Fprintf(bw, "  ephemeral %s\n", k[len(prefix):])
				return nil
			})
		})
		if err != nil {
			return err
		}
		err = scan(txn, endingPrefix, func(k, v []byte) error {
			id := beUint64(k[len(endingPrefix):])
			fmt.Fprintf(bw, "ending session %d cause=%s\n", id, lockCauseName(v))
			prefix := ephemeralPrefix(id)
			return scan(txn, prefix, func(k, _ []byte) error {
				fmt.Fprintf(bw, "  ephemeral %s\n", k[len(prefix):])
				return nil
			})
		})
		if err != nil {
			return err
		}
		err = scan(txn, []byte{spaceMember}, func(k, v []byte) error {
			m, err := decodeMember(string(k[1:]), v)
			if err != nil {
				return err
			}
			fmt.Fprintf(bw, "member %q raft=%q client=%q http=%q\n", m.ID, m.RaftAddr, m.ClientAddr, m.HTTPAddr)
			return nil
		})
		if err != nil {
			return err
		}
		if err := dumpACL(bw, txn); err != nil {
			return err
		}
		return s.dumpLocks(bw, txn)
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

func dumpTree(w io.Writer, txn *badger.Txn, p string, n *node) error {
	st := n.stat
	fmt.Fprintf(w, "%s rev=%d/%d time=%d/%d ver=%d cver=%d owner=%d children=%d seq=%d data=%s\n",
		p, st.CreateRev, st.ModRev, st.Ctime, st.Mtime, st.Version, st.CVersion,
		st.EphemeralOwner, st.NumChildren, n.seq, formatData(n.data))
	// Children are collected before recursing: badger allows nested
	// iterators in a read transaction, but collecting keeps at most one
	// iterator open however deep the tree is.
	type child struct {
		path string
		n    *node
	}
	var kids []child
	prefix := childPrefix(p)
	err := scan(txn, prefix, func(k, v []byte) error {
		cn, err := decodeNode(append([]byte(nil), v...))
		kids = append(kids, child{namespace.Join(p, string(k[len(prefix):])), cn})
		return err
	})
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := dumpTree(w, txn, k.path, k.n); err != nil {
			return err
		}
	}
	return nil
}

// formatData quotes short data and summarizes long data.
func formatData(d []byte) string {
	if len(d) <= dumpDataMax {
		return fmt.Sprintf("%q", d)
	}
	sum := sha256.Sum256(d)
	return fmt.Sprintf("<%d bytes sha256:%x>", len(d), sum[:8])
}

// dumpACL lists the ACL meta and rules from the transaction (not the
// in-memory table, so a table that drifted from badger shows).
func dumpACL(w io.Writer, txn *badger.Txn) error {
	v, ok, err := getValue(txn, metaACL)
	if err != nil || !ok {
		return err // !ok: not bootstrapped, version 1 state
	}
	if len(v) != 2 {
		return fmt.Errorf("%w: acl meta %x", namespace.ErrStorage, v)
	}
	fmt.Fprintf(w, "acl enforced default=%s\n", namespace.Perm(v[1]))
	return scan(txn, []byte{spaceACL}, func(k, v []byte) error {
		i := bytes.IndexByte(k[1:], 0)
		if i < 0 || len(v) != 1 {
			return fmt.Errorf("%w: acl record %q", namespace.ErrStorage, k)
		}
		fmt.Fprintf(w, "acl %s\n", namespace.ACLRule{Identity: string(k[1 : 1+i]), Prefix: string(k[2+i:]), Perms: namespace.Perm(v[0])})
		return nil
	})
}

// lockCauseName names an ending session record's cause for Dump.
func lockCauseName(v []byte) string {
	if len(v) == 1 && lockCause(v[0]) == causeExpire {
		return "expired"
	}
	return "closed"
}
