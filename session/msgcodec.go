package session

import (
	"math"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/msgp"
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
//     or txn's ops and compares, a txn's branch, a sequencer, ACL rules,
//     keep-alive batches, lists in answers) is declined and takes the
//     reflection encoder.
//   - decodeRequestFast and decodeResponseFast read the forms that encoder
//     writes and decline anything else (an unknown, repeated or unsorted
//     field, nil, an integer that does not fit, a field they do not cover,
//     bytes left over): decodeBody then runs the cost check and the
//     reflection decoder, so every body decodes, and fails, exactly as
//     before. What they allocate is a copy of strings and byte slices of
//     the body, so the decode budget holds.

// appendRequestFast appends q's body to b, or declines (false, b
// unchanged in length) when q has a field this file does not write.
func appendRequestFast(b []byte, q *Request) ([]byte, bool) {
	if len(q.Ops) > 0 || q.Sequencer != nil || len(q.Sessions) > 0 || len(q.ACL) > 0 || len(q.Compares) > 0 || len(q.Else) > 0 {
		return b, false
	}
	start := len(b)
	b = append(b, 0) // the map header, set below
	n := 0
	if q.After != "" {
		b, n = msgp.AppendStr(msgp.AppendKey(b, "a"), q.After), n+1
	}
	if q.Cache {
		b, n = msgp.AppendBool(msgp.AppendKey(b, "ca"), true), n+1
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
	if q.MinRev != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "mrv"), q.MinRev), n+1
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
		len(r.KeepAlives) > 0 || r.ACL != nil || r.Succeeded {
		return b, false
	}
	start := len(b)
	b = append(b, 0) // the map header, set below
	n := 0
	if r.Code != 0 {
		b, n = msgp.AppendUint(msgp.AppendKey(b, "c"), uint64(r.Code)), n+1
	}
	if r.Cached {
		b, n = msgp.AppendBool(msgp.AppendKey(b, "cch"), true), n+1
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
	if r.Next {
		b, n = msgp.AppendBool(msgp.AppendKey(b, "nx"), true), n+1
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
// (false; q is then in any state). It takes the fields in the sorted
// order go-msgpack writes them (SortedKey), so each at most once.
func decodeRequestFast(body []byte, q *Request) bool {
	r := msgp.NewReader(body)
	n := r.MapLen()
	var k []byte
	for i := 0; i < n && r.OK(); i++ {
		k = r.SortedKey(k)
		switch string(k) {
		case "a":
			q.After = r.Str()
		case "ca":
			q.Cache = r.Bool()
		case "cid":
			q.Call = r.Uint(math.MaxUint64)
		case "cn":
			q.ClientName = r.Str()
		case "d":
			q.Data = r.Bin()
		case "f":
			q.Flags = namespace.CreateFlags(r.Uint(math.MaxUint8))
		case "fr":
			q.FromRev = r.Uint(math.MaxUint64)
		case "ht":
			q.HoldTTLMillis = r.Int(64)
		case "k":
			q.Kind = WatchKind(r.Uint(math.MaxUint8))
		case "ld":
			q.LockDelayMillis = r.Int(64)
		case "lim":
			q.Limit = int32(r.Int(32))
		case "lk_rid":
			q.RequestID = r.Str()
		case "mo":
			q.Mode = LockMode(r.Uint(math.MaxUint8))
		case "mrv":
			q.MinRev = r.Uint(math.MaxUint64)
		case "n":
			q.Node = r.Str()
		case "os":
			q.OneShot = r.Bool()
		case "p":
			q.Path = r.Str()
		case "pv":
			q.ProtocolVersion = uint32(r.Uint(math.MaxUint32))
		case "r":
			q.Recursive = r.Bool()
		case "s":
			q.Session = r.Uint(math.MaxUint64)
		case "sec":
			q.Secret = r.Bin()
		case "st":
			q.Stale = r.Bool()
		case "t":
			q.Type = MsgType(r.Uint(math.MaxUint8))
		case "to":
			q.TimeoutMillis = r.Int(64)
		case "try":
			q.Try = r.Bool()
		case "ttl":
			q.TTLMillis = r.Int(64)
		case "v":
			q.Version = r.Int(64)
		default:
			return false // a field this path does not read
		}
	}
	return r.Done()
}

// decodeResponseFast decodes body into p, a zeroed Response, or declines
// (false; p is then in any state), as decodeRequestFast does.
func decodeResponseFast(body []byte, p *Response) bool {
	r := msgp.NewReader(body)
	n := r.MapLen()
	var k []byte
	for i := 0; i < n && r.OK(); i++ {
		k = r.SortedKey(k)
		switch string(k) {
		case "c":
			p.Code = Code(r.Uint(math.MaxUint16))
		case "cch":
			p.Cached = r.Bool()
		case "cid":
			p.Call = r.Uint(math.MaxUint64)
		case "d":
			p.Data = r.Bin()
		case "e":
			p.Exists = r.Bool()
		case "ft":
			p.Features = Feature(r.Uint(math.MaxUint64))
		case "l":
			p.Leader = r.Str()
		case "lk":
			p.Lock = LockPhase(r.Uint(math.MaxUint8))
		case "m":
			p.Message = r.Str()
		case "mr":
			p.More = r.Bool()
		case "n":
			p.Node = r.Str()
		case "nx":
			p.Next = r.Bool()
		case "ok":
			p.Valid = r.Bool()
		case "p":
			p.Path = r.Str()
		case "pv":
			p.ProtocolVersion = uint32(r.Uint(math.MaxUint32))
		case "r":
			p.Rev = r.Uint(math.MaxUint64)
		case "s":
			p.Session = r.Uint(math.MaxUint64)
		case "sec":
			p.Secret = r.Bin()
		case "sid":
			p.ServerID = r.Str()
		case "st":
			decodeStat(&r, &p.Stat)
		case "tk":
			p.Token = r.Uint(math.MaxUint64)
		case "ttl":
			p.TTLMillis = r.Int(64)
		default:
			return false
		}
	}
	return r.Done()
}

// decodeStat reads a Stat map (any subset of its fields, in sorted order).
func decodeStat(r *msgp.Reader, s *namespace.Stat) {
	n := r.MapLen()
	var k []byte
	for i := 0; i < n && r.OK(); i++ {
		k = r.SortedKey(k)
		switch string(k) {
		case "CVersion":
			s.CVersion = r.Int(64)
		case "CreateRev":
			s.CreateRev = r.Uint(math.MaxUint64)
		case "Ctime":
			s.Ctime = r.Int(64)
		case "DataLength":
			s.DataLength = int32(r.Int(32))
		case "EphemeralOwner":
			s.EphemeralOwner = r.Uint(math.MaxUint64)
		case "ModRev":
			s.ModRev = r.Uint(math.MaxUint64)
		case "Mtime":
			s.Mtime = r.Int(64)
		case "NumChildren":
			s.NumChildren = r.Int(64)
		case "Version":
			s.Version = r.Int(64)
		default:
			r.Fail()
			return
		}
	}
}
