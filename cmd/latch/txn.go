package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/latch-io/latch/client"
)

func init() {
	register(&command{
		name:    "txn",
		usage:   "[--file F]",
		summary: "run a conditional transaction read from stdin (or F)",
		help: `Reads a transaction, as text or as JSON, from stdin (or --file F) and runs
it in one command: when every "if" holds the "then" ops run, else the
"else" ops, all or nothing. Prints the branch that ran and each op's
result; a failing op fails the command and changes nothing.

Text: one line each, # comments; a token may be Go-quoted ("a b").

  if TARGET PATH OP ARG        TARGET value|version|create_rev|mod_rev|exists|owner,
                               OP = != > <, ARG the value (value) or a number
                               (exists: 1 present, 0 absent)
  then | else                  the ops that follow belong to that branch
  create [--ephemeral] [--sequential] PATH [DATA]
  set PATH DATA [--version N]
  delete PATH [--version N]
  check PATH VERSION
  get PATH

  printf 'if exists /cfg = 0\nthen\ncreate /cfg blue\nelse\nget /cfg\n' | latch txn

JSON: the body of POST /api/v1/txn:
  {"if": [{"target": "value", "path": "/cfg", "cmp": "=", "data": "blue"}],
   "then": [{"op": "set", "path": "/cfg", "data": "green"}],
   "else": [{"op": "get", "path": "/cfg"}]}`,
		minArgs: 0, maxArgs: 0,
		setup: func(fs *flag.FlagSet) runFunc {
			file := fs.String("file", "-", "read the transaction from this file (-: stdin)")
			return func(ctx context.Context, e *env, _ []string) error {
				src, err := readTxnSource(*file)
				if err != nil {
					return err
				}
				spec, err := parseTxn(src)
				if err != nil {
					return fmt.Errorf("%w: txn: %v", errUsage, err)
				}
				ctx, cancel := e.withTimeout(ctx)
				defer cancel()
				var t *client.Txn
				if e.g.cells != "" {
					x, err := e.cellsClient(ctx)
					if err != nil {
						return err
					}
					t = x.Txn()
				} else {
					c, err := e.client(ctx)
					if err != nil {
						return err
					}
					t = c.Txn()
				}
				resp, err := t.If(spec.cmps...).Then(spec.then...).Else(spec.els...).Commit(ctx)
				if resp == nil {
					return err
				}
				if perr := emitTxn(e, spec, resp, err); perr != nil {
					return perr
				}
				return err
			}
		},
	})
}

func readTxnSource(file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(io.LimitReader(os.Stdin, maxTxnSource+1))
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTxnSource+1))
	if err == nil && len(b) > maxTxnSource {
		err = fmt.Errorf("%w: txn: %s is over %d bytes", errUsage, file, maxTxnSource)
	}
	return b, err
}

// maxTxnSource bounds what latch txn reads: a request is at most 1 MiB.
const maxTxnSource = 2 << 20

// txnSpec is a parsed transaction; names are its ops' kinds, for output.
type txnSpec struct {
	cmps      []client.Cmp
	then, els []client.Op
	thenKinds []string
	elseKinds []string
	thenPaths []string
	elsePaths []string
}

// parseTxn reads the JSON form (it starts with "{") or the text form.
func parseTxn(src []byte) (*txnSpec, error) {
	if len(src) > maxTxnSource {
		return nil, fmt.Errorf("over %d bytes", maxTxnSource)
	}
	if t := bytes.TrimSpace(src); len(t) > 0 && t[0] == '{' {
		return parseTxnJSON(t)
	}
	return parseTxnText(src)
}

type txnJSONCompare struct {
	Target     string  `json:"target"`
	Path       string  `json:"path"`
	Cmp        string  `json:"cmp"`
	Data       *string `json:"data"`
	DataBase64 []byte  `json:"data_base64"`
	Number     int64   `json:"number"`
}

type txnJSONOp struct {
	Op         string  `json:"op"`
	Path       string  `json:"path"`
	Data       *string `json:"data"`
	DataBase64 []byte  `json:"data_base64"`
	Version    *int64  `json:"version"`
	Ephemeral  bool    `json:"ephemeral"`
	Sequential bool    `json:"sequential"`
}

func parseTxnJSON(src []byte) (*txnSpec, error) {
	var in struct {
		If   []txnJSONCompare `json:"if"`
		Then []txnJSONOp      `json:"then"`
		Else []txnJSONOp      `json:"else"`
	}
	d := json.NewDecoder(bytes.NewReader(src))
	d.DisallowUnknownFields()
	if err := d.Decode(&in); err != nil {
		return nil, fmt.Errorf("JSON: %v", err)
	}
	spec := &txnSpec{}
	for i, c := range in.If {
		var arg string
		switch {
		case c.Data != nil:
			arg = *c.Data
		case c.DataBase64 != nil:
			arg = string(c.DataBase64)
		default:
			arg = strconv.FormatInt(c.Number, 10)
		}
		if c.Target == "value" && c.Data == nil && c.DataBase64 == nil {
			arg = ""
		}
		cmp, err := txnCompare(c.Target, c.Path, c.Cmp, arg)
		if err != nil {
			return nil, fmt.Errorf("if %d: %v", i, err)
		}
		spec.cmps = append(spec.cmps, cmp)
	}
	for b, ops := range [2][]txnJSONOp{in.Then, in.Else} {
		for i, o := range ops {
			data := []byte(nil)
			if o.Data != nil {
				data = []byte(*o.Data)
			} else if o.DataBase64 != nil {
				data = o.DataBase64
			}
			version := int64(-1)
			if o.Version != nil {
				version = *o.Version
			}
			op, err := txnOp(o.Op, o.Path, data, version, o.Ephemeral, o.Sequential)
			if err != nil {
				return nil, fmt.Errorf("%s op %d: %v", [2]string{"then", "else"}[b], i, err)
			}
			spec.add(b == 1, o.Op, o.Path, op)
		}
	}
	return spec, nil
}

func (s *txnSpec) add(els bool, kind, path string, op client.Op) {
	if els {
		s.els, s.elseKinds, s.elsePaths = append(s.els, op), append(s.elseKinds, kind), append(s.elsePaths, path)
		return
	}
	s.then, s.thenKinds, s.thenPaths = append(s.then, op), append(s.thenKinds, kind), append(s.thenPaths, path)
}

func parseTxnText(src []byte) (*txnSpec, error) {
	spec := &txnSpec{}
	els, sawBranch := false, false
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 64<<10), maxTxnSource)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		toks, err := txnTokens(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("line %d (%s): %s", n, line, fmt.Sprintf(format, a...))
		}
		switch kw := toks[0]; kw {
		case "if":
			if sawBranch {
				return nil, fail("conditions come before then and else")
			}
			if len(toks) != 5 {
				return nil, fail("want: if TARGET PATH OP ARG")
			}
			cmp, err := txnCompare(toks[1], toks[2], toks[3], toks[4])
			if err != nil {
				return nil, fail("%v", err)
			}
			spec.cmps = append(spec.cmps, cmp)
		case "then", "else":
			if len(toks) != 1 {
				return nil, fail("%s stands alone on its line", kw)
			}
			els, sawBranch = kw == "else", true
		default:
			if !sawBranch {
				return nil, fail("an op before then or else")
			}
			op, path, err := txnTextOp(toks)
			if err != nil {
				return nil, fail("%v", err)
			}
			spec.add(els, kw, path, op)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return spec, nil
}

// txnTextOp reads one op line: flags (--version N, --ephemeral,
// --sequential) may stand anywhere after the kind.
func txnTextOp(toks []string) (client.Op, string, error) {
	kind := toks[0]
	version := int64(-1)
	var eph, seq bool
	var pos []string
	for i := 1; i < len(toks); i++ {
		switch toks[i] {
		case "--version", "-version":
			if i+1 == len(toks) {
				return client.Op{}, "", fmt.Errorf("--version needs a number")
			}
			v, err := strconv.ParseInt(toks[i+1], 10, 64)
			if err != nil {
				return client.Op{}, "", fmt.Errorf("--version %q is not a number", toks[i+1])
			}
			version, i = v, i+1
		case "--ephemeral", "-ephemeral":
			eph = true
		case "--sequential", "-sequential":
			seq = true
		default:
			pos = append(pos, toks[i])
		}
	}
	want := map[string][2]int{"create": {1, 2}, "set": {2, 2}, "delete": {1, 1}, "check": {2, 2}, "get": {1, 1}}[kind]
	if want == [2]int{} {
		return client.Op{}, "", fmt.Errorf("%q is not create, set, delete, check or get", kind)
	}
	if len(pos) < want[0] || len(pos) > want[1] {
		return client.Op{}, "", fmt.Errorf("%s takes %d to %d arguments, not %d", kind, want[0], want[1], len(pos))
	}
	var data []byte
	if kind == "create" && len(pos) == 2 || kind == "set" {
		data = []byte(pos[1])
	}
	if kind == "check" {
		v, err := strconv.ParseInt(pos[1], 10, 64)
		if err != nil {
			return client.Op{}, "", fmt.Errorf("check VERSION %q is not a number", pos[1])
		}
		version = v
	}
	op, err := txnOp(kind, pos[0], data, version, eph, seq)
	return op, pos[0], err
}

// txnOp builds one op of a branch.
func txnOp(kind, path string, data []byte, version int64, eph, seq bool) (client.Op, error) {
	if (eph || seq) && kind != "create" {
		return client.Op{}, fmt.Errorf("ephemeral and sequential are create's")
	}
	switch kind {
	case "create":
		var opts []client.CreateOption
		if eph {
			opts = append(opts, client.Ephemeral())
		}
		if seq {
			opts = append(opts, client.Sequential())
		}
		return client.OpCreate(path, data, opts...), nil
	case "set":
		return client.OpSet(path, data, client.WithVersion(version)), nil
	case "delete":
		return client.OpDelete(path, client.WithVersion(version)), nil
	case "check":
		return client.OpCheck(path, version), nil
	case "get":
		return client.OpGet(path), nil
	}
	return client.Op{}, fmt.Errorf("%q is not create, set, delete, check or get", kind)
}

var txnTargets = map[string]func(string) client.CmpTarget{
	"value": client.Value, "version": client.Version, "create_rev": client.CreateRev,
	"mod_rev": client.ModRev, "owner": client.Owner,
}

// txnCompare builds one condition from its words.
func txnCompare(target, path, op, arg string) (client.Cmp, error) {
	if op == "" {
		op = "="
	}
	if target == "exists" {
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || (n != 0 && n != 1) {
			return client.Cmp{}, fmt.Errorf("exists compares with 1 (present) or 0 (absent), not %q", arg)
		}
		switch op {
		case "=":
		case "!=":
			n = 1 - n
		default:
			return client.Cmp{}, fmt.Errorf("exists compares with = or != only, not %s", op)
		}
		if n == 1 {
			return client.NodeExists(path), nil
		}
		return client.NodeAbsent(path), nil
	}
	mk, ok := txnTargets[target]
	if !ok {
		return client.Cmp{}, fmt.Errorf("target %q is not value, version, create_rev, mod_rev, exists or owner", target)
	}
	if target == "value" {
		return client.Compare(mk(path), op, arg), nil
	}
	n, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return client.Cmp{}, fmt.Errorf("%s compares with a number, not %q", target, arg)
	}
	return client.Compare(mk(path), op, n), nil
}

// txnTokens splits a line at spaces; a token may be Go-quoted.
func txnTokens(line string) ([]string, error) {
	var out []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '"' || line[0] == '`' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, fmt.Errorf("bad quoted token at %s", line)
			}
			s, _ := strconv.Unquote(q)
			out, line = append(out, s), line[len(q):]
			continue
		}
		end := strings.IndexAny(line, " \t")
		if end < 0 {
			end = len(line)
		}
		out, line = append(out, line[:end]), line[end:]
	}
	return out, nil
}

// emitTxn prints the branch that ran and each op's result (with the
// failing op's error when the txn failed).
func emitTxn(e *env, spec *txnSpec, resp *client.TxnResponse, failed error) error {
	branch, kinds, paths := "then", spec.thenKinds, spec.thenPaths
	if !resp.Succeeded {
		branch, kinds, paths = "else", spec.elseKinds, spec.elsePaths
	}
	type jsonResult struct {
		Op   string `json:"op"`
		Path string `json:"path"`
		*jsonData
		Stat  *jsonStat `json:"stat,omitempty"`
		Error string    `json:"error,omitempty"`
	}
	results := make([]jsonResult, len(resp.Results))
	for i, r := range resp.Results {
		jr := jsonResult{}
		if i < len(kinds) {
			jr.Op, jr.Path = kinds[i], paths[i]
		}
		if r.Path != "" {
			jr.Path = r.Path
		}
		switch {
		case r.Err != nil:
			jr.Error = r.Err.Error()
		case failed != nil: // not applied
		default:
			if jr.Op == "get" {
				d := toJSONData(r.Data)
				jr.jsonData = &d
			}
			if r.Stat != (client.Stat{}) {
				st := toJSONStat(r.Stat)
				jr.Stat = &st
			}
		}
		results[i] = jr
	}
	v := map[string]any{"branch": branch, "succeeded": resp.Succeeded, "results": results}
	if failed == nil {
		v["revision"] = resp.Rev
	}
	return e.emit(v, func(w io.Writer) {
		fmt.Fprintln(w, branch)
		for i, r := range results {
			switch {
			case r.Error != "":
				fmt.Fprintf(w, "[%d] %s %s: %s\n", i, r.Op, r.Path, r.Error)
			case failed != nil:
				fmt.Fprintf(w, "[%d] %s %s: not applied\n", i, r.Op, r.Path)
			case r.jsonData != nil:
				fmt.Fprintf(w, "[%d] %s %s version %d: %s\n", i, r.Op, r.Path, resp.Results[i].Stat.Version, resp.Results[i].Data)
			case r.Stat != nil:
				fmt.Fprintf(w, "[%d] %s %s version %d\n", i, r.Op, r.Path, r.Stat.Version)
			default:
				fmt.Fprintf(w, "[%d] %s %s\n", i, r.Op, r.Path)
			}
		}
	})
}
