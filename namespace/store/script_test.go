package store

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/latch-io/latch/namespace"
)

var update = flag.Bool("update", false, "rewrite golden outputs in testdata/namespace")

// TestScripts runs the golden scripts in testdata/namespace. A script is a
// list of commands; each command that prints something is followed by a
// "----" line, its output, and a blank line. Commands:
//
//	limits K=N...             start over on a fresh store with changed limits
//	time N                    leader time of the next command (default: +1000 per command)
//	index N                   raft index of the next command (default: +1)
//	create [-e SID] [-s] PATH [DATA]
//	set PATH DATA [-v N]      delete PATH [-v N]      check PATH [-v N]
//	multi {                   ops one per line, then "}" (nested multi allowed, to test refusal)
//	txn {                     "if TARGET PATH OP ARG" lines (TARGET value|version|create_rev|mod_rev|
//	                          exists|owner, OP = != > <, ARG data or number), "then", ops, "else",
//	                          ops, then "}"; ops as in multi, plus "get PATH [-v N]"
//	open TTLMS [IDENTITY]     close SID               expire SID...
//	tick                      member ID RAFT CLIENT HTTP      rmmember ID
//	op N                      a command with raw op number N
//	get PATH  stat PATH  exists PATH  ls PATH [AFTER [LIMIT]]
//	session SID  sessions  members  dump
//	lock [-s] [-ttl MS] [-delay MS] SID PATH [DATA]   (-delay -1: NoLockDelay)
//	unlock SID NODE  cancel SID NODE  renew [-ttl MS] [-session-ttl MS] SID NODE
//	lockinfo NODE  queue PATH  sequencer PATH MODE TOKEN SID  timer
//	as ID[:SID] COMMAND       run COMMAND with Identity ID ("" as "") and, for set/delete, Session SID
//	aclboot DEFAULT [ID PREFIX RIGHTS]...    aclset ID PREFIX RIGHTS...    aclrm ID PREFIX...
//	acl  perms ID PATH        the rule table; ID's rights on PATH
//	restart                   close and reopen the store; prints whether Dump is unchanged
//	snapshot                  snapshot, restore into a fresh store that takes over; likewise
//
// A token may be Go-quoted ("/a\x00b"), and {S*N} inside a token expands
// to S repeated N times.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("../../testdata/namespace/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in ../../testdata/namespace")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

func runScript(t *testing.T, file string) {
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	env := &scriptEnv{t: t, s: s, dir: dir, index: 1, time: 1000}
	lines := strings.Split(strings.TrimRight(string(src), "\n"), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			i++
			continue
		}
		start := i
		cmd := []string{line}
		i++
		if strings.HasSuffix(strings.TrimSpace(line), "{") {
			depth := 1
			for ; i < len(lines) && depth > 0; i++ {
				l := strings.TrimSpace(lines[i])
				cmd = append(cmd, lines[i])
				if strings.HasSuffix(l, "{") {
					depth++
				} else if l == "}" {
					depth--
				}
			}
		}
		var want []string
		if i < len(lines) && lines[i] == "----" {
			for i++; i < len(lines) && lines[i] != ""; i++ {
				want = append(want, lines[i])
			}
		}
		got := env.run(cmd)
		for _, l := range cmd {
			out.WriteString(l + "\n")
		}
		if got != "" {
			out.WriteString("----\n" + got + "\n")
			if i < len(lines) && lines[i] != "" { // an output ends at a blank line
				out.WriteString("\n")
			}
		}
		if w := strings.Join(want, "\n"); got != w && !*update {
			t.Errorf("%s:%d: %s\n--- got\n%s\n--- want\n%s", file, start+1, line, got, w)
		}
	}
	if *update {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type scriptEnv struct {
	t     *testing.T
	s     *Store
	dir   string
	index uint64
	time  int64
}

// run executes one command and returns its output, without a final newline.
func (e *scriptEnv) run(lines []string) string {
	args := tokens(e.t, lines[0])
	if args[0] == "as" {
		return e.runAs(args[1], lines)
	}
	switch args[0] {
	case "time":
		e.time = mustInt(e.t, args[1])
		return ""
	case "index":
		e.index = uint64(mustInt(e.t, args[1]))
		return ""
	case "limits":
		e.limits(args[1:])
		return ""
	case "get", "stat", "exists", "ls", "session", "sessions", "members", "dump",
		"lockinfo", "queue", "sequencer", "timer", "acl", "perms":
		return e.read(args)
	case "restart":
		return e.restart()
	case "snapshot":
		return e.snapshot()
	}
	return e.apply(e.command(lines))
}

// runAs runs the command after "as ID[:SID]" with that identity and
// session.
func (e *scriptEnv) runAs(who string, lines []string) string {
	id, sid, _ := strings.Cut(who, ":")
	first := skipToken(e.t, skipToken(e.t, lines[0]))
	cmd := e.command(append([]string{first}, lines[1:]...))
	cmd.Identity = id
	if sid != "" && (cmd.Op == namespace.OpSet || cmd.Op == namespace.OpDelete || cmd.Op == namespace.OpMulti || cmd.Op == namespace.OpTxn) {
		cmd.Session = uint64(mustInt(e.t, sid))
		for i := range cmd.Ops {
			cmd.Ops[i].Session = cmd.Session
		}
		for i := range cmd.Else {
			cmd.Else[i].Session = cmd.Session
		}
	}
	return e.apply(cmd)
}

func (e *scriptEnv) apply(cmd *namespace.Command) string {
	r := e.s.Apply(e.index, e.time, cmd)
	e.index++
	e.time += 1000
	var b strings.Builder
	writeResult(&b, r)
	if cmd.Op == namespace.OpTxn && (r.Err == nil || len(r.Results) > 0) { // else it failed before choosing
		branch := "else"
		if r.Succeeded {
			branch = "then"
		}
		return fmt.Sprintf("branch=%s\n%s", branch, strings.TrimRight(b.String(), "\n"))
	}
	return strings.TrimRight(b.String(), "\n")
}

// limits replaces the store with a fresh one using DefaultLimits changed
// by KEY=N arguments (path, depth, data, multi, page).
func (e *scriptEnv) limits(args []string) {
	l := namespace.DefaultLimits()
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		n := int(mustInt(e.t, v))
		switch k {
		case "path":
			l.MaxPathBytes = n
		case "depth":
			l.MaxDepth = n
		case "data":
			l.MaxDataBytes = n
		case "multi":
			l.MaxMultiOps = n
		case "page":
			l.MaxChildrenPage = n
		case "lockbatch":
			l.MaxLockBatch = n
		case "lockdelay":
			l.DefaultLockDelayMillis = int64(n)
		case "maxlockdelay":
			l.MaxLockDelayMillis = int64(n)
		default:
			e.t.Fatalf("limits: unknown key %q", k)
		}
	}
	e.dir = e.t.TempDir()
	s, err := Open(Config{Dir: e.dir, Limits: l})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	e.s, e.index = s, 1
}

// restart closes the store and opens its directory again.
func (e *scriptEnv) restart() string {
	before := dump(e.t, e.s)
	if err := e.s.Close(); err != nil {
		e.t.Fatal(err)
	}
	s, err := Open(Config{Dir: e.dir, Limits: e.s.Limits()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	e.s = s
	return sameDump(before, dump(e.t, s))
}

// snapshot moves the state to a fresh store through Snapshot and Restore.
func (e *scriptEnv) snapshot() string {
	before := dump(e.t, e.s)
	state := snapshotBytes(e.t, e.s)
	e.dir = e.t.TempDir()
	s, err := Open(Config{Dir: e.dir, Limits: e.s.Limits()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	if err := s.Restore(bytes.NewReader(state)); err != nil {
		e.t.Fatal(err)
	}
	e.s = s
	return sameDump(before, dump(e.t, s))
}

func sameDump(before, after string) string {
	if before == after {
		return "dump unchanged"
	}
	return "DUMP CHANGED:\n" + before + "---\n" + after
}

// command parses a mutating command, multi included.
func (e *scriptEnv) command(lines []string) *namespace.Command {
	args := tokens(e.t, lines[0])
	cmd := &namespace.Command{Version: namespace.AnyVersion}
	rest, version := flagInt(e.t, args[1:], "-v", namespace.AnyVersion)
	switch args[0] {
	case "create":
		cmd.Op = namespace.OpCreate
		for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
			switch rest[0] {
			case "-e":
				cmd.Flags |= namespace.FlagEphemeral
				cmd.Session = uint64(mustInt(e.t, rest[1]))
				rest = rest[2:]
			case "-s":
				cmd.Flags |= namespace.FlagSequential
				rest = rest[1:]
			default:
				e.t.Fatalf("create: unknown flag %s", rest[0])
			}
		}
		cmd.Path = rest[0]
		if len(rest) > 1 {
			cmd.Data = []byte(rest[1])
		}
	case "set":
		cmd.Op, cmd.Path, cmd.Data, cmd.Version = namespace.OpSet, rest[0], []byte(rest[1]), version
	case "delete":
		cmd.Op, cmd.Path, cmd.Version = namespace.OpDelete, rest[0], version
	case "check":
		cmd.Op, cmd.Path, cmd.Version = namespace.OpCheck, rest[0], version
	case "multi":
		cmd.Op = namespace.OpMulti
		body := lines[1 : len(lines)-1]
		for i := 0; i < len(body); i++ {
			op := []string{body[i]}
			if strings.HasSuffix(strings.TrimSpace(body[i]), "{") {
				depth := 1
				for i++; depth > 0; i++ {
					op = append(op, body[i])
					if l := strings.TrimSpace(body[i]); strings.HasSuffix(l, "{") {
						depth++
					} else if l == "}" {
						depth--
					}
				}
				i--
			}
			cmd.Ops = append(cmd.Ops, *e.command(op))
		}
	case "txn":
		cmd.Op = namespace.OpTxn
		e.txn(cmd, lines[1:len(lines)-1])
	case "get":
		cmd.Op, cmd.Path, cmd.Version = namespace.OpGet, rest[0], version
	case "open":
		cmd.Op = namespace.OpSessionOpen
		cmd.TTLMillis = mustInt(e.t, rest[0])
		cmd.Secret = []byte(fmt.Sprintf("secret-%d", e.index))
		if len(rest) > 1 {
			cmd.Identity = rest[1]
		}
	case "close":
		cmd.Op, cmd.Session = namespace.OpSessionClose, uint64(mustInt(e.t, rest[0]))
	case "expire":
		cmd.Op = namespace.OpSessionExpire
		for _, a := range rest {
			cmd.Sessions = append(cmd.Sessions, uint64(mustInt(e.t, a)))
		}
	case "tick":
		cmd.Op = namespace.OpNoop
	case "member":
		cmd.Op = namespace.OpSetMember
		cmd.Member = &namespace.Member{ID: rest[0], RaftAddr: rest[1], ClientAddr: rest[2], HTTPAddr: rest[3]}
	case "rmmember":
		cmd.Op, cmd.Member = namespace.OpRemoveMember, &namespace.Member{ID: rest[0]}
	case "op":
		cmd.Op = namespace.Op(mustInt(e.t, rest[0]))
	case "lock":
		cmd.Op = namespace.OpLockRequest
		for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
			switch rest[0] {
			case "-s":
				cmd.Mode = namespace.LockShared
				rest = rest[1:]
			case "-ttl":
				cmd.HoldTTLMillis = mustInt(e.t, rest[1])
				rest = rest[2:]
			case "-delay":
				cmd.LockDelayMillis = mustInt(e.t, rest[1])
				rest = rest[2:]
			default:
				e.t.Fatalf("lock: unknown flag %s", rest[0])
			}
		}
		cmd.Session, cmd.Path = uint64(mustInt(e.t, rest[0])), rest[1]
		if len(rest) > 2 {
			cmd.Data = []byte(rest[2])
		}
	case "aclboot":
		cmd.Op = namespace.OpACLBootstrap
		p, err := namespace.ParsePerm(rest[0])
		if err != nil {
			e.t.Fatal(err)
		}
		cmd.ACLDefault, cmd.ACL = p, e.rules(rest[1:], 3)
	case "aclset":
		cmd.Op, cmd.ACL = namespace.OpACLSet, e.rules(rest, 3)
	case "aclrm":
		cmd.Op, cmd.ACL = namespace.OpACLRemove, e.rules(rest, 2)
	case "unlock", "cancel", "renew":
		cmd.Op = map[string]namespace.Op{"unlock": namespace.OpLockRelease, "cancel": namespace.OpLockCancel, "renew": namespace.OpLockRenew}[args[0]]
		for len(rest) > 2 && (rest[0] == "-ttl" || rest[0] == "-session-ttl") {
			if rest[0] == "-ttl" {
				cmd.HoldTTLMillis = int64(mustInt(e.t, rest[1]))
			} else {
				cmd.TTLMillis = int64(mustInt(e.t, rest[1]))
			}
			rest = rest[2:]
		}
		cmd.Session, cmd.Path = uint64(mustInt(e.t, rest[0])), rest[1]
	default:
		e.t.Fatalf("unknown script command %q", args[0])
	}
	return cmd
}

// txn fills an OpTxn from the lines between its braces.
func (e *scriptEnv) txn(cmd *namespace.Command, body []string) {
	branch := &cmd.Ops
	for i := 0; i < len(body); i++ {
		line := body[i]
		args := tokens(e.t, line)
		switch args[0] {
		case "if":
			if len(args) != 5 {
				e.t.Fatalf("txn: want if TARGET PATH OP ARG, got %q", line)
			}
			t, err := namespace.ParseCmpTarget(args[1])
			if err != nil {
				t = namespace.CmpTarget(mustInt(e.t, args[1])) // a raw number, to test refusal
			}
			op, err := namespace.ParseCmpOp(args[3])
			if err != nil {
				e.t.Fatal(err)
			}
			c := namespace.Compare{Path: args[2], Target: t, Op: op}
			if t == namespace.CmpValue {
				c.Value = []byte(args[4])
			} else {
				c.Number = mustInt(e.t, args[4])
			}
			cmd.Compares = append(cmd.Compares, c)
		case "then":
			branch = &cmd.Ops
		case "else":
			branch = &cmd.Else
		default:
			op := []string{line}
			for depth := strings.Count(line, "{"); depth > 0; {
				i++
				op = append(op, body[i])
				if l := strings.TrimSpace(body[i]); strings.HasSuffix(l, "{") {
					depth++
				} else if l == "}" {
					depth--
				}
			}
			*branch = append(*branch, *e.command(op))
		}
	}
}

// rules reads groups of n tokens (ID PREFIX [RIGHTS]) as ACL rules.
func (e *scriptEnv) rules(args []string, n int) []namespace.ACLRule {
	if len(args)%n != 0 {
		e.t.Fatalf("want groups of %d tokens, got %q", n, args)
	}
	var out []namespace.ACLRule
	for i := 0; i < len(args); i += n {
		r := namespace.ACLRule{Identity: args[i], Prefix: args[i+1]}
		if n == 3 {
			p, err := namespace.ParsePerm(args[i+2])
			if err != nil {
				e.t.Fatal(err)
			}
			r.Perms = p
		}
		out = append(out, r)
	}
	return out
}

func (e *scriptEnv) read(args []string) string {
	s := e.s
	var b strings.Builder
	switch args[0] {
	case "get":
		data, st, err := s.Get(args[1])
		if err != nil {
			return "err: " + err.Error()
		}
		fmt.Fprintf(&b, "data=%s %s", formatData(data), formatStat(st))
	case "stat":
		st, err := s.Stat(args[1])
		if err != nil {
			return "err: " + err.Error()
		}
		b.WriteString(formatStat(st))
	case "exists":
		ok, st, err := s.Exists(args[1])
		if err != nil {
			return "err: " + err.Error()
		}
		fmt.Fprintf(&b, "exists=%t", ok)
		if ok {
			b.WriteString(" " + formatStat(st))
		}
	case "ls":
		after, limit := "", 0
		if len(args) > 2 {
			after = args[2]
		}
		if len(args) > 3 {
			limit = int(mustInt(e.t, args[3]))
		}
		names, more, err := s.Children(args[1], after, limit)
		if err != nil {
			return "err: " + err.Error()
		}
		fmt.Fprintf(&b, "%q more=%t", names, more)
	case "session":
		si, err := s.Session(uint64(mustInt(e.t, args[1])))
		if err != nil {
			return "err: " + err.Error()
		}
		fmt.Fprintf(&b, "%+v", si)
	case "sessions":
		ss, err := s.Sessions()
		if err != nil {
			return "err: " + err.Error()
		}
		for _, si := range ss {
			eph, err := s.SessionEphemerals(si.ID)
			if err != nil {
				return "err: " + err.Error()
			}
			fmt.Fprintf(&b, "%d ttl=%d identity=%q secret=%q ephemerals=%q\n", si.ID, si.TTLMillis, si.Identity, si.Secret, eph)
		}
	case "members":
		ms, err := s.Members()
		if err != nil {
			return "err: " + err.Error()
		}
		for _, m := range ms {
			fmt.Fprintf(&b, "%+v\n", m)
		}
	case "dump":
		if err := s.Dump(&b); err != nil {
			return "err: " + err.Error()
		}
	case "acl":
		a := s.ACL()
		fmt.Fprintf(&b, "enforced=%t default=%s", a.Enforced, a.Default)
		for _, r := range a.Rules {
			fmt.Fprintf(&b, "\n%s", r)
		}
	case "perms":
		b.WriteString(s.Perms(args[1], args[2]).String())
	case "lockinfo":
		li, err := s.Lock(args[1])
		if err != nil {
			return "err: " + err.Error()
		}
		b.WriteString(formatLockInfo(li))
	case "queue":
		q, err := s.LockQueue(args[1])
		if err != nil {
			return "err: " + err.Error()
		}
		for _, li := range q {
			b.WriteString(formatLockInfo(li) + "\n")
		}
		if len(q) == 0 {
			b.WriteString("empty")
		}
	case "sequencer":
		mode := map[string]namespace.LockMode{"exclusive": namespace.LockExclusive, "shared": namespace.LockShared}[args[2]]
		ok, err := s.CheckSequencer(args[1], mode, uint64(mustInt(e.t, args[3])), uint64(mustInt(e.t, args[4])))
		if err != nil {
			return "err: " + err.Error()
		}
		fmt.Fprintf(&b, "held=%t", ok)
	case "timer":
		at, ok := s.NextTimer()
		if !ok {
			return "none"
		}
		fmt.Fprintf(&b, "at=%d", at)
	}
	return strings.TrimRight(b.String(), "\n")
}

func writeResult(b *strings.Builder, r *namespace.Result) {
	if r.Err != nil {
		fmt.Fprintf(b, "err rev=%d: %v [%s]\n", r.Index, r.Err, sentinelName(r.Err))
	} else {
		fmt.Fprintf(b, "ok rev=%d", r.Index)
		if r.Path != "" {
			fmt.Fprintf(b, " path=%s", r.Path)
		}
		if r.Stat != (namespace.Stat{}) {
			fmt.Fprintf(b, " %s", formatStat(r.Stat))
		}
		if r.Session != 0 {
			fmt.Fprintf(b, " session=%d", r.Session)
		}
		b.WriteString("\n")
	}
	for i, sub := range r.Results {
		switch {
		case sub.Err != nil:
			fmt.Fprintf(b, "  [%d] err: %v [%s]\n", i, sub.Err, sentinelName(sub.Err))
		case r.Err != nil:
			fmt.Fprintf(b, "  [%d] not applied\n", i)
		default:
			fmt.Fprintf(b, "  [%d] ok", i)
			if sub.Path != "" {
				fmt.Fprintf(b, " path=%s", sub.Path)
			}
			if sub.Data != nil {
				fmt.Fprintf(b, " data=%s", formatData(sub.Data))
			}
			if sub.Stat != (namespace.Stat{}) {
				fmt.Fprintf(b, " %s", formatStat(sub.Stat))
			}
			if sub.Session != 0 {
				fmt.Fprintf(b, " session=%d", sub.Session)
			}
			b.WriteString("\n")
		}
	}
	for _, g := range r.Grants {
		fmt.Fprintf(b, "  grant %s path=%s %s session=%d token=%d\n", g.Node, g.Path, g.Mode, g.Session, g.Token)
	}
	for _, ev := range r.Events {
		fmt.Fprintf(b, "  event %s", ev.Type)
		if ev.Path != "" {
			fmt.Fprintf(b, " %s", ev.Path)
		}
		if ev.Session != 0 {
			fmt.Fprintf(b, " session=%d", ev.Session)
		}
		if l := ev.Lock; l != nil && l.Cause != "" {
			fmt.Fprintf(b, " cause=%s", l.Cause)
		}
		if l := ev.Lock; l != nil && l.Waiter != "" {
			fmt.Fprintf(b, " waiter=%s waiter-session=%d", l.Waiter, l.WaiterSession)
		}
		fmt.Fprintf(b, " rev=%d\n", ev.Rev)
	}
}

func formatLockInfo(li namespace.LockInfo) string {
	s := fmt.Sprintf("%d %s path=%s %s session=%d ttl=%dms delay=%dms", li.Rev, li.Node, li.Path, li.Mode,
		li.Session, li.HoldTTLMillis, li.LockDelayMillis)
	switch {
	case li.Phantom:
		s += fmt.Sprintf(" phantom token=%d until=%d", li.Token, li.DelayEnd)
	case li.Granted:
		s += fmt.Sprintf(" held token=%d at=%d deadline=%d", li.Token, li.GrantTime, li.Deadline)
	default:
		s += " waiting"
	}
	return s
}

func formatStat(st namespace.Stat) string {
	return fmt.Sprintf("rev=%d/%d time=%d/%d ver=%d cver=%d owner=%d children=%d len=%d",
		st.CreateRev, st.ModRev, st.Ctime, st.Mtime, st.Version, st.CVersion, st.EphemeralOwner, st.NumChildren, st.DataLength)
}

// sentinelName names the sentinel an error wraps, so goldens pin the
// identity of errors, not just their text.
func sentinelName(err error) string {
	for _, s := range []struct {
		name string
		err  error
	}{
		{"ErrBadRule", namespace.ErrBadRule}, {"ErrNoNode", namespace.ErrNoNode}, {"ErrNodeExists", namespace.ErrNodeExists}, {"ErrBadVersion", namespace.ErrBadVersion},
		{"ErrNotEmpty", namespace.ErrNotEmpty}, {"ErrBadPath", namespace.ErrBadPath}, {"ErrDataTooLarge", namespace.ErrDataTooLarge},
		{"ErrEphemeralParent", namespace.ErrEphemeralParent}, {"ErrNoSession", namespace.ErrNoSession},
		{"ErrTooManyOps", namespace.ErrTooManyOps}, {"ErrAlreadyApplied", namespace.ErrAlreadyApplied},
		{"ErrRootImmutable", namespace.ErrRootImmutable}, {"ErrBadCommand", namespace.ErrBadCommand}, {"ErrNoMember", namespace.ErrNoMember},
		{"ErrWouldDeadlock", namespace.ErrWouldDeadlock}, {"ErrNoLock", namespace.ErrNoLock}, {"ErrNotLockOwner", namespace.ErrNotLockOwner},
		{"ErrPermissionDenied", namespace.ErrPermissionDenied}, {"ErrReservedName", namespace.ErrReservedName},
		{"ErrLockNotHeld", namespace.ErrLockNotHeld}, {"ErrStorage", namespace.ErrStorage},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return "unknown"
}

// tokens splits a script line into tokens, unquoting and expanding them.
func tokens(t *testing.T, line string) []string {
	var out []string
	line = strings.TrimSpace(line)
	for line != "" {
		var tok string
		if line[0] == '"' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				t.Fatalf("bad quoted token in %q: %v", line, err)
			}
			tok, _ = strconv.Unquote(q)
			line = line[len(q):]
		} else {
			end := strings.IndexAny(line, " \t")
			if end < 0 {
				end = len(line)
			}
			tok, line = line[:end], line[end:]
		}
		out = append(out, expand(t, tok))
		line = strings.TrimLeft(line, " \t")
	}
	return out
}

// skipToken returns line without its first token.
func skipToken(t *testing.T, line string) string {
	line = strings.TrimSpace(line)
	if line != "" && line[0] == '"' {
		q, err := strconv.QuotedPrefix(line)
		if err != nil {
			t.Fatalf("bad quoted token in %q: %v", line, err)
		}
		return strings.TrimSpace(line[len(q):])
	}
	if end := strings.IndexAny(line, " \t"); end >= 0 {
		return strings.TrimSpace(line[end:])
	}
	return ""
}

// expand replaces each {S*N} with S repeated N times.
func expand(t *testing.T, tok string) string {
	for {
		open := strings.Index(tok, "{")
		if open < 0 || tok == "{" || tok == "}" {
			return tok
		}
		end := strings.Index(tok[open:], "}")
		star := strings.LastIndex(tok[open:open+max(end, 0)], "*")
		if end < 0 || star < 0 {
			return tok
		}
		n := mustInt(t, tok[open+star+1:open+end])
		tok = tok[:open] + strings.Repeat(tok[open+1:open+star], int(n)) + tok[open+end+1:]
	}
}

func flagInt(t *testing.T, args []string, name string, def int64) ([]string, int64) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return append(append([]string(nil), args[:i]...), args[i+2:]...), mustInt(t, args[i+1])
		}
	}
	return args, def
}

func mustInt(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return n
}

func openTestStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}
