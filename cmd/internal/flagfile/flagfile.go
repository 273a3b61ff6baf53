// Package flagfile sets a command's flags from a JSON config file, the
// same way for latchd (--config) and the latch CLI (its global flags from
// $LATCH_CONFIG or ~/.config/latch/config.json).
//
// The file is one JSON object whose keys name flags. Its values keep their
// JSON types, checked against the flag each sets:
//
//   - a string sets any flag but a boolean, as its text on the command
//     line would; a duration is a string ("500ms", "10s");
//   - a number sets a numeric or string flag, written as given (1000000
//     stays 1000000, never 1e+06); it does not set a duration (say the
//     unit) nor a boolean;
//   - true or false sets only a boolean flag;
//   - a list of strings sets a string flag to its items joined with
//     commas (["n1=a:7421", "n2=b:7421"]);
//   - anything else (null, an object, a list of non-strings) is refused.
//
// A flag already set when Apply runs (given on the command line) keeps
// its value: the command line wins over the file. Errors name the file
// and the key.
package flagfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrUnknownKey is the error of a key that names no flag the file may
// set.
var ErrUnknownKey = errors.New("unknown key")

// Apply sets the flags of fs from the JSON object in path. flagOf maps a
// key to the name of the flag it sets, false for a key the file may not
// set (ErrUnknownKey); nil maps every key to the flag of its name. A
// missing file is an error wrapping os.ErrNotExist.
func Apply(fs *flag.FlagSet, path string, flagOf func(key string) (string, bool)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // a number is written as given, never through a float
	var kv map[string]any
	if err := dec.Decode(&kv); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for key, v := range kv {
		name, ok := key, true
		if flagOf != nil {
			name, ok = flagOf(key)
		}
		f := fs.Lookup(name)
		if !ok || f == nil {
			return fmt.Errorf("config file %s: %w %q", path, ErrUnknownKey, key)
		}
		if given[name] {
			continue
		}
		s, err := value(f, v)
		if err == nil {
			err = fs.Set(name, s)
		}
		if err != nil {
			return fmt.Errorf("config file %s: key %q: %w", path, key, err)
		}
	}
	return nil
}

// value turns a decoded JSON value (numbers as json.Number) into the text
// flag f parses, by the rules of the package comment.
func value(f *flag.Flag, v any) (string, error) {
	kind := "string" // what the flag holds; a Value without Get takes text
	var held any
	if g, ok := f.Value.(flag.Getter); ok {
		held = g.Get()
	}
	switch held.(type) {
	case nil, string:
	case bool:
		kind = "bool"
	case time.Duration:
		kind = "duration"
	default:
		kind = "number"
	}
	switch v := v.(type) {
	case bool:
		if kind != "bool" {
			return "", fmt.Errorf("true/false given for a %s", kind)
		}
		return strconv.FormatBool(v), nil
	case json.Number:
		switch kind {
		case "bool":
			return "", errors.New("a number given for a boolean (want true or false)")
		case "duration":
			return "", errors.New(`a number given for a duration (want a string such as "500ms" or "10s")`)
		}
		return v.String(), nil
	case string:
		if kind == "bool" {
			return "", errors.New("a string given for a boolean (want true or false)")
		}
		return v, nil
	case []any:
		if kind != "string" {
			return "", fmt.Errorf("a list given for a %s", kind)
		}
		parts := make([]string, len(v))
		for i, p := range v {
			s, ok := p.(string)
			if !ok {
				return "", fmt.Errorf("list item %d is not a string", i)
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("unsupported value %v (want a string, number, boolean or list of strings)", v)
}
