package httpapi

import (
	"fmt"
	"net/http"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/apiwire"
	"github.com/latch-io/latch/session"
)

// POST /api/v1/txn: a conditional transaction (MsgTxn), JSON only.
//
//	{"if":   [{"target": "value", "path": "/cfg/mode", "cmp": "=", "data": "blue"},
//	          {"target": "exists", "path": "/cfg/lock", "cmp": "=", "number": 0}],
//	 "then": [{"op": "set", "path": "/cfg/mode", "data": "green"}],
//	 "else": [{"op": "get", "path": "/cfg/mode"}]}
//
// answers {"revision", "succeeded", "results"} (one result per op of the
// branch that ran; a get's has data and stat); a failing op answers its
// error's status with the same fields, only the failing op's result set.

// apiCompare is one condition of a txn.
type apiCompare struct {
	Target string `json:"target"` // value, version, create_rev, mod_rev, exists, owner
	Path   string `json:"path"`
	Cmp    string `json:"cmp"` // =, !=, >, <; "" is =
	apiData
	Number int64 `json:"number"`
}

type apiTxnResult struct {
	apiOpResult
	apiData
}

func (a *API) txn(w http.ResponseWriter, r *http.Request, c caller) {
	var in struct {
		If   []apiCompare `json:"if"`
		Then []apiOp      `json:"then"`
		Else []apiOp      `json:"else"`
	}
	if err := a.decodeJSON(w, r, &in); err != nil {
		apiError(w, err)
		return
	}
	req := &session.Request{Type: session.MsgTxn, Compares: make([]namespace.Compare, len(in.If))}
	for i, ac := range in.If {
		cmp, err := ac.compare()
		if err != nil {
			apiError(w, fmt.Errorf("compare %d: %w", i, err))
			return
		}
		req.Compares[i] = cmp
	}
	var err error
	if req.Ops, err = apiSessionOps(in.Then, "then", true); err == nil {
		req.Else, err = apiSessionOps(in.Else, "else", true)
	}
	if err != nil {
		apiError(w, err)
		return
	}
	cc, sid, err := a.conn(r, c)
	if err != nil {
		apiError(w, err)
		return
	}
	req.Session = sid
	resp, err := a.call(r, cc, req)
	if resp == nil {
		apiError(w, err)
		return
	}
	results := make([]apiTxnResult, len(resp.Results))
	for i, res := range resp.Results {
		results[i].apiOpResult = apiResultOf(res)
		if res.Code == session.CodeOK && res.Data != nil {
			results[i].apiData = toAPIData(res.Data)
		}
	}
	body := map[string]any{"succeeded": resp.Succeeded, "results": results}
	if err != nil {
		code := session.CodeOf(err)
		body["code"], body["name"], body["message"] = code, code.String(), err.Error()
		writeJSON(w, apiwire.Status(code), body)
		return
	}
	body["revision"] = resp.Rev
	writeJSON(w, http.StatusOK, body)
}

func (ac apiCompare) compare() (namespace.Compare, error) {
	t, err := namespace.ParseCmpTarget(ac.Target)
	if err != nil {
		return namespace.Compare{}, err
	}
	op := namespace.CmpEqual
	if ac.Cmp != "" {
		if op, err = namespace.ParseCmpOp(ac.Cmp); err != nil {
			return namespace.Compare{}, err
		}
	}
	cmp := namespace.Compare{Path: ac.Path, Target: t, Op: op, Number: ac.Number}
	if t == namespace.CmpValue {
		if ac.Number != 0 {
			return cmp, fmt.Errorf("%w: a value compare takes data or data_base64, not number", namespace.ErrBadCommand)
		}
		if cmp.Value, err = ac.bytes(); err != nil {
			return cmp, err
		}
		if cmp.Value == nil {
			cmp.Value = []byte{}
		}
	} else if ac.Data != nil || ac.DataBase64 != nil {
		return cmp, fmt.Errorf("%w: a %s compare takes number, not data", namespace.ErrBadCommand, t)
	}
	return cmp, cmp.Validate()
}

// apiSessionOps turns the JSON ops of a multi or a txn branch into wire
// ops; gets allows "get" (a txn's).
func apiSessionOps(in []apiOp, what string, gets bool) ([]session.Op, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]session.Op, len(in))
	for i, op := range in {
		t, ok := apiOpTypes[op.Op]
		if op.Op == "get" && gets {
			t, ok = namespace.OpGet, true
		}
		if !ok {
			allowed := "create, set, delete or check"
			if gets {
				allowed = "create, set, delete, check or get"
			}
			return nil, fmt.Errorf("%w: %s op %d: %q is not %s", namespace.ErrBadCommand, what, i, op.Op, allowed)
		}
		data, err := op.bytes()
		if err != nil {
			return nil, fmt.Errorf("%s op %d: %w", what, i, err)
		}
		var flags namespace.CreateFlags
		if op.Ephemeral {
			flags |= namespace.FlagEphemeral
		}
		if op.Sequential {
			flags |= namespace.FlagSequential
		}
		out[i] = session.Op{Type: t, Path: op.Path, Data: data, Flags: flags, Version: versionOf(op.Version)}
	}
	return out, nil
}

// apiResultOf is one op's result of a multi or a txn.
func apiResultOf(res session.OpResult) apiOpResult {
	out := apiOpResult{Path: res.Path, Code: res.Code, Message: res.Message}
	if res.Code != session.CodeOK {
		out.Name = res.Code.String()
	} else if res.Stat != (namespace.Stat{}) {
		out.Stat = toAPIStat(res.Stat)
	}
	return out
}
