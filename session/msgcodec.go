package session

import (
	"math"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session/msgp"
)

// Request and Response by hand. The wire format is what go-msgpack's
// reflection codec (handle) makes of them; reflection cost an encode and a
// decode per message on both ends (in a run of 64 proposers 17% of the
// client's CPU and 5% of the leader's). This file writes and reads the
// same bytes for the messages of the hot paths (reads, writes, locks,
// sessions):
//
//   - appendRequestFast and appendResponseFast write exactly what handle's
//     encoder writes (FuzzMsgCodec compares them): a struct is a map of its
//     non-empty fields in the order of their sorted tags (msgp has the forms
//     of each value). A message with a field they do not cover (a multi's
//     ops, a sequencer, ACL rules, keep-alive batches, lists in answers)
//     is declined and takes the reflection encoder.
//   - decodeRequestFast and decodeResponseFast read the forms that encoder
//     writes and decline anything else (an unknown or repeated field, nil,
//     an integer that does not fit, a field they do not cover, bytes left
//     over): decodeBody then runs the cost check and the reflection
//     decoder, so every body decodes, and fails, exactly as before. What
//     they allocate is a copy of strings and byte slices of the body, so
//     the decode budget holds.

// appendRequestFast appends q's body to b, or declines (false, b
// unchanged in length) when q has a field this file does not write.
func appendRequestFast(b []byte, q *Request) ([]byte, bool) {
	if len(q.Ops) > 0 || q.Sequencer != nil || len(q.Sessions) > 0 || len(q.ACL) > 0 {
		return b, false
	}
	start := len(b)
	b = append(b, 0) // the map header, set below
	n := 0
	if q.After != "" {
		b, n = msgp.AppendStr(msgp.AppendKey(b, "a"), q.After), n+1
	}
	if q.Call != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "cid"), q.Call), n+1
	}
	if q.ClientName != "" {
		b, n = msgp.AppendStr(msgp.AppendKey(b, "cn"), q.ClientName), n+1
	}
	if len(q.Data) > 0 {
		b, n = msgp.AppendBin(msgp.AppendKey(b, "d"), q.Data), n+1
	}
	if q.Flags != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "f"), uint64(q.Flags)), n+1
	}
	if q.FromRev != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "fr"), q.FromRev), n+1
	}
	if q.HoldTTLMillis != 0 {
		b, n = msgp.AppendInt(msgp.AppendKey(b, "ht"), q.HoldTTLMillis), n+1
	}
	if q.Kind != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "k"), uint64(q.Kind)), n+1
	}
	if q.LockDelayMillis != 0 {
		b, n = msgp.AppendInt(msgp.AppendKey(b, "ld"), q.LockDelayMillis), n+1
	}
	if q.Limit != 0 {
		b, n = msgp.AppendInt(msgp.AppendKey(b, "lim"), int64(q.Limit)), n+1
	}
	if q.RequestID != "" {
		b, n = msgp.AppendStr(msgp.AppendKey(b, "lk_rid"), q.RequestID), n+1
	}
	if q.Mode != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "mo"), uint64(q.Mode)), n+1
	}
	if q.Node != "" {
		b, n = msgp.AppendStr(msgp.AppendKey(b, "n"), q.Node), n+1
	}
	if q.OneShot {
		b, n = msgp.AppendBool(msgp.AppendKey(b, "os"), true), n+1
	}
	if q.Path != "" {
		b, n = msgp.AppendStr(msgp.AppendKey(b, "p"), q.Path), n+1
	}
	if q.ProtocolVersion != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "pv"), uint64(q.ProtocolVersion)), n+1
	}
	if q.Recursive {
		b, n = msgp.AppendBool(msgp.AppendKey(b, "r"), true), n+1
	}
	if q.Session != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "s"), q.Session), n+1
	}
	if len(q.Secret) > 0 {
		b, n = msgp.AppendBin(msgp.AppendKey(b, "sec"), q.Secret), n+1
	}
	if q.Stale {
		b, n = msgp.AppendBool(msgp.AppendKey(b, "st"), true), n+1
	}
	b, n = msgp.AppendUint(msgp.AppendKey(b, "t"), uint64(q.Type)), n+1
	if q.TimeoutMillis != 0 {
		b, n = msgp.AppendInt(msgp.AppendKey(b, "to"), q.TimeoutMillis), n+1
	}
	if q.Try {
		b, n = msgp.AppendBool(msgp.AppendKey(b, "try"), true), n+1
	}
	if q.TTLMillis != 0 {
		b, n = msgp.AppendInt(msgp.AppendKey(b, "ttl"), q.TTLMillis), n+1
	}
	if q.Version != 0 {
		b, n = msgp.AppendInt(msgp.AppendKey(b, "v"), q.Version), n+1
	}
	return setMapLen(b, start, n), true
}

// appendResponseFast appends r's body to b, or declines (false, b
// unchanged in length) when r has a field this file does not write.
func appendResponseFast(b []byte, r *Response) ([]byte, bool) {
	if len(r.Names) > 0 || len(r.Results) > 0 || len(r.Events) > 0 || len(r.Locks) > 0 ||
		len(r.LockHistory) > 0 || len(r.Sessions) > 0 || len(r.Members) > 0 || r.Status != nil ||
		len(r.KeepAlives) > 0 || r.ACL != nil {
		return b, false
	}
	start := len(b)
	b = append(b, 0) // the map header, set below
	n := 0
	if r.Code != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "c"), uint64(r.Code)), n+1
	}
	if r.Call != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "cid"), r.Call), n+1
	}
	if len(r.Data) > 0 {
		b, n = msgp.AppendBin(msgp.AppendKey(b, "d"), r.Data), n+1
	}
	if r.Exists {
		b, n = msgp.AppendBool(msgp.AppendKey(b, "e"), true), n+1
	}
	if r.Features != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "ft"), uint64(r.Features)), n+1
	}
	if r.Leader != "" {
		b, n = msgp.AppendStr(msgp.AppendKey(b, "l"), r.Leader), n+1
	}
	if r.Lock != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "lk"), uint64(r.Lock)), n+1
	}
	if r.Message != "" {
		b, n = msgp.AppendStr(msgp.AppendKey(b, "m"), r.Message), n+1
	}
	if r.More {
		b, n = msgp.AppendBool(msgp.AppendKey(b, "mr"), true), n+1
	}
	if r.Node != "" {
		b, n = msgp.AppendStr(msgp.AppendKey(b, "n"), r.Node), n+1
	}
	if r.Valid {
		b, n = msgp.AppendBool(msgp.AppendKey(b, "ok"), true), n+1
	}
	if r.Path != "" {
		b, n = msgp.AppendStr(msgp.AppendKey(b, "p"), r.Path), n+1
	}
	if r.ProtocolVersion != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "pv"), uint64(r.ProtocolVersion)), n+1
	}
	if r.Rev != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "r"), r.Rev), n+1
	}
	if r.Session != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "s"), r.Session), n+1
	}
	if len(r.Secret) > 0 {
		b, n = msgp.AppendBin(msgp.AppendKey(b, "sec"), r.Secret), n+1
	}
	if r.ServerID != "" {
		b, n = msgp.AppendStr(msgp.AppendKey(b, "sid"), r.ServerID), n+1
	}
	if r.Stat != (namespace.Stat{}) {
		b, n = appendStat(msgp.AppendKey(b, "st"), &r.Stat), n+1
	}
	if r.Token != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "tk"), r.Token), n+1
	}
	if r.TTLMillis != 0 {
		b, n = msgp.AppendInt(msgp.AppendKey(b, "ttl"), r.TTLMillis), n+1
	}
	return setMapLen(b, start, n), true
}

// appendStat writes a Stat: it has no tags, so its keys are the field
// names, every field written, in sorted order.
func appendStat(b []byte, s *namespace.Stat) []byte {
	b = append(b, 0x89)
	b = msgp.AppendInt(msgp.AppendKey(b, "CVersion"), s.CVersion)
	b = msgp.AppendUint(msgp.AppendKey(b, "CreateRev"), s.CreateRev)
	b = msgp.AppendInt(msgp.AppendKey(b, "Ctime"), s.Ctime)
	b = msgp.AppendInt(msgp.AppendKey(b, "DataLength"), int64(s.DataLength))
	b = msgp.AppendUint(msgp.AppendKey(b, "EphemeralOwner"), s.EphemeralOwner)
	b = msgp.AppendUint(msgp.AppendKey(b, "ModRev"), s.ModRev)
	b = msgp.AppendInt(msgp.AppendKey(b, "Mtime"), s.Mtime)
	b = msgp.AppendInt(msgp.AppendKey(b, "NumChildren"), s.NumChildren)
	return msgp.AppendInt(msgp.AppendKey(b, "Version"), s.Version)
}

// setMapLen writes the header of the n-entry map whose fields follow the
// one byte kept for it at b[start]: a fixmap in place, else a map16 (more
// than 15 fields: rare) for which the fields move up two bytes.
func setMapLen(b []byte, start, n int) []byte {
	if n < 16 {
		b[start] = 0x80 | byte(n)
		return b
	}
	b = append(b, 0, 0)
	copy(b[start+3:], b[start+1:len(b)-2])
	b[start], b[start+1], b[start+2] = 0xde, byte(n>>8), byte(n)
	return b
}

// decodeRequestFast decodes body into q, a zeroed Request, or declines
// (false; q is then in any state).
func decodeRequestFast(body []byte, q *Request) bool {
	r := msgp.NewReader(body)
	n := r.MapLen()
	var seen uint32
	for i := 0; i < n && r.OK(); i++ {
		k := r.Key()
		f := requestField(k)
		if f < 0 || seen&(1<<f) != 0 {
			// Unknown, declined, or repeated (go-msgpack decodes a second
			// one over the first, which this path does not copy).
			return false
		}
		seen |= 1 << f
		switch f {
		case 0:
			q.After = r.Str()
		case 1:
			q.Call = r.Uint(math.MaxUint64)
		case 2:
			q.ClientName = r.Str()
		case 3:
			q.Data = r.Bin()
		case 4:
			q.Flags = namespace.CreateFlags(r.Uint(math.MaxUint8))
		case 5:
			q.FromRev = r.Uint(math.MaxUint64)
		case 6:
			q.HoldTTLMillis = r.Int(64)
		case 7:
			q.Kind = WatchKind(r.Uint(math.MaxUint8))
		case 8:
			q.LockDelayMillis = r.Int(64)
		case 9:
			q.Limit = int32(r.Int(32))
		case 10:
			q.RequestID = r.Str()
		case 11:
			q.Mode = LockMode(r.Uint(math.MaxUint8))
		case 12:
			q.Node = r.Str()
		case 13:
			q.OneShot = r.Bool()
		case 14:
			q.Path = r.Str()
		case 15:
			q.ProtocolVersion = uint32(r.Uint(math.MaxUint32))
		case 16:
			q.Recursive = r.Bool()
		case 17:
			q.Session = r.Uint(math.MaxUint64)
		case 18:
			q.Secret = r.Bin()
		case 19:
			q.Stale = r.Bool()
		case 20:
			q.Type = MsgType(r.Uint(math.MaxUint8))
		case 21:
			q.TimeoutMillis = r.Int(64)
		case 22:
			q.Try = r.Bool()
		case 23:
			q.TTLMillis = r.Int(64)
		case 24:
			q.Version = r.Int(64)
		}
	}
	return r.Done()
}

// requestField numbers the Request fields decodeRequestFast reads, in tag
// order; -1 for any other key.
func requestField(k []byte) int {
	switch string(k) {
	case "a":
		return 0
	case "cid":
		return 1
	case "cn":
		return 2
	case "d":
		return 3
	case "f":
		return 4
	case "fr":
		return 5
	case "ht":
		return 6
	case "k":
		return 7
	case "ld":
		return 8
	case "lim":
		return 9
	case "lk_rid":
		return 10
	case "mo":
		return 11
	case "n":
		return 12
	case "os":
		return 13
	case "p":
		return 14
	case "pv":
		return 15
	case "r":
		return 16
	case "s":
		return 17
	case "sec":
		return 18
	case "st":
		return 19
	case "t":
		return 20
	case "to":
		return 21
	case "try":
		return 22
	case "ttl":
		return 23
	case "v":
		return 24
	}
	return -1
}

// decodeResponseFast decodes body into p, a zeroed Response, or declines
// (false; p is then in any state).
func decodeResponseFast(body []byte, p *Response) bool {
	r := msgp.NewReader(body)
	n := r.MapLen()
	var seen uint32
	for i := 0; i < n && r.OK(); i++ {
		f := responseField(r.Key())
		if f < 0 || seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		switch f {
		case 0:
			p.Code = Code(r.Uint(math.MaxUint16))
		case 1:
			p.Call = r.Uint(math.MaxUint64)
		case 2:
			p.Data = r.Bin()
		case 3:
			p.Exists = r.Bool()
		case 4:
			p.Features = Feature(r.Uint(math.MaxUint64))
		case 5:
			p.Leader = r.Str()
		case 6:
			p.Lock = LockPhase(r.Uint(math.MaxUint8))
		case 7:
			p.Message = r.Str()
		case 8:
			p.More = r.Bool()
		case 9:
			p.Node = r.Str()
		case 10:
			p.Valid = r.Bool()
		case 11:
			p.Path = r.Str()
		case 12:
			p.ProtocolVersion = uint32(r.Uint(math.MaxUint32))
		case 13:
			p.Rev = r.Uint(math.MaxUint64)
		case 14:
			p.Session = r.Uint(math.MaxUint64)
		case 15:
			p.Secret = r.Bin()
		case 16:
			p.ServerID = r.Str()
		case 17:
			decodeStat(&r, &p.Stat)
		case 18:
			p.Token = r.Uint(math.MaxUint64)
		case 19:
			p.TTLMillis = r.Int(64)
		}
	}
	return r.Done()
}

// responseField numbers the Response fields decodeResponseFast reads, in
// tag order; -1 for any other key.
func responseField(k []byte) int {
	switch string(k) {
	case "c":
		return 0
	case "cid":
		return 1
	case "d":
		return 2
	case "e":
		return 3
	case "ft":
		return 4
	case "l":
		return 5
	case "lk":
		return 6
	case "m":
		return 7
	case "mr":
		return 8
	case "n":
		return 9
	case "ok":
		return 10
	case "p":
		return 11
	case "pv":
		return 12
	case "r":
		return 13
	case "s":
		return 14
	case "sec":
		return 15
	case "sid":
		return 16
	case "st":
		return 17
	case "tk":
		return 18
	case "ttl":
		return 19
	}
	return -1
}

// decodeStat reads a Stat map (any subset of its fields, once each).
func decodeStat(r *msgp.Reader, s *namespace.Stat) {
	n := r.MapLen()
	var seen uint16
	for i := 0; i < n && r.OK(); i++ {
		var f uint
		switch string(r.Key()) {
		case "CVersion":
			f, s.CVersion = 0, r.Int(64)
		case "CreateRev":
			f, s.CreateRev = 1, r.Uint(math.MaxUint64)
		case "Ctime":
			f, s.Ctime = 2, r.Int(64)
		case "DataLength":
			f, s.DataLength = 3, int32(r.Int(32))
		case "EphemeralOwner":
			f, s.EphemeralOwner = 4, r.Uint(math.MaxUint64)
		case "ModRev":
			f, s.ModRev = 5, r.Uint(math.MaxUint64)
		case "Mtime":
			f, s.Mtime = 6, r.Int(64)
		case "NumChildren":
			f, s.NumChildren = 7, r.Int(64)
		case "Version":
			f, s.Version = 8, r.Int(64)
		default:
			r.Fail()
			return
		}
		if seen&(1<<f) != 0 {
			r.Fail()
			return
		}
		seen |= 1 << f
	}
}
