package namespace

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"

	badger "github.com/dgraph-io/badger/v4"
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
			fmt.Fprintf(bw, "session %d ttl=%dms opened=%d identity=%q secret=%x\n",
				si.ID, si.TTLMillis, si.OpenTime, si.Identity, si.Secret)
			prefix := ephemeralPrefix(si.ID)
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
		kids = append(kids, child{Join(p, string(k[len(prefix):])), cn})
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
