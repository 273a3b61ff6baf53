package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/latch-io/latch/client"
)

// emit writes v as one JSON document with -o json, else calls text.
func (e *env) emit(v any, text func(w io.Writer)) error {
	if e.g.output == "json" {
		enc := json.NewEncoder(e.stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	}
	text(e.stdout)
	return nil
}

// jsonStat is Stat as JSON with stable snake_case names.
type jsonStat struct {
	CreateRevision uint64 `json:"create_revision"`
	ModRevision    uint64 `json:"mod_revision"`
	Ctime          string `json:"ctime"`
	Mtime          string `json:"mtime"`
	Version        int64  `json:"version"`
	CVersion       int64  `json:"cversion"`
	EphemeralOwner uint64 `json:"ephemeral_owner"`
	NumChildren    int64  `json:"num_children"`
	DataLength     int32  `json:"data_length"`
}

func toJSONStat(s client.Stat) jsonStat {
	return jsonStat{
		CreateRevision: s.CreateRev,
		ModRevision:    s.ModRev,
		Ctime:          nanos(s.Ctime),
		Mtime:          nanos(s.Mtime),
		Version:        s.Version,
		CVersion:       s.CVersion,
		EphemeralOwner: s.EphemeralOwner,
		NumChildren:    s.NumChildren,
		DataLength:     s.DataLength,
	}
}

func nanos(n int64) string { return time.Unix(0, n).UTC().Format(time.RFC3339Nano) }

func printStat(w io.Writer, s client.Stat) {
	j := toJSONStat(s)
	fmt.Fprintf(w, "create_revision  %d\n", j.CreateRevision)
	fmt.Fprintf(w, "mod_revision     %d\n", j.ModRevision)
	fmt.Fprintf(w, "ctime            %s\n", j.Ctime)
	fmt.Fprintf(w, "mtime            %s\n", j.Mtime)
	fmt.Fprintf(w, "version          %d\n", j.Version)
	fmt.Fprintf(w, "cversion         %d\n", j.CVersion)
	fmt.Fprintf(w, "ephemeral_owner  %d\n", j.EphemeralOwner)
	fmt.Fprintf(w, "num_children     %d\n", j.NumChildren)
	fmt.Fprintf(w, "data_length      %d\n", j.DataLength)
}

// jsonData carries node data as a string when it is UTF-8, else base64.
type jsonData struct {
	Data       *string `json:"data,omitempty"`
	DataBase64 []byte  `json:"data_base64,omitempty"`
}

func toJSONData(b []byte) jsonData {
	if utf8.Valid(b) {
		s := string(b)
		return jsonData{Data: &s}
	}
	return jsonData{DataBase64: b}
}
