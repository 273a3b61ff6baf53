package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/latch-io/latch/cmd/internal/flagfile"
)

// Global flags may also come from the environment and from a config file,
// so an operator does not repeat --endpoints --ca --cert --key on every
// call. A flag on the command line wins over the environment, which wins
// over the file, which wins over the built-in default.
//
// The environment variable of a global flag is LATCH_ and the flag's name
// in capitals with - as _ (LATCH_ENDPOINTS, LATCH_CA, LATCH_CERT,
// LATCH_KEY, LATCH_ADMIN, LATCH_SESSION_TTL, LATCH_TIMEOUT, LATCH_CELLS), and
// LATCH_OUTPUT for -o. The config file is a JSON object whose keys are the
// flag names ("output" for -o), with latchd's --config type rules (package
// flagfile: durations as "10s", "endpoints" may be a list); it is
// $LATCH_CONFIG, else
// latch/config.json in the user's config folder (~/.config on Linux) when
// that file exists.

// envName is the environment variable of global flag name.
func envName(name string) string {
	if name == "o" {
		return "LATCH_OUTPUT"
	}
	return "LATCH_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// configPath returns the config file to read ("" for none) and whether
// the user named it (then it must exist).
func configPath(getenv func(string) string) (string, bool) {
	if p := getenv("LATCH_CONFIG"); p != "" {
		return p, true
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", false
	}
	return filepath.Join(dir, "latch", "config.json"), false
}

// applyDefaults sets the global flags on fs (all registered, none parsed
// yet) from the config file and then the environment.
func applyDefaults(fs *flag.FlagSet, getenv func(string) string) error {
	if path, named := configPath(getenv); path != "" {
		if err := applyConfigFile(fs, path, named); err != nil {
			return err
		}
	}
	for _, name := range sortedGlobals() {
		v := getenv(envName(name))
		if v == "" {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%w: %s=%q: %v", errUsage, envName(name), v, err)
		}
	}
	return nil
}

// applyConfigFile sets the global flags the file at path names, by
// flagfile's type rules; "output" is -o. A missing file is no error
// unless the user named it.
func applyConfigFile(flags *flag.FlagSet, path string, named bool) error {
	err := flagfile.Apply(flags, path, func(key string) (string, bool) {
		if key == "output" {
			key = "o"
		}
		return key, isGlobal(key)
	})
	switch {
	case err == nil, errors.Is(err, os.ErrNotExist) && !named:
		return nil
	case errors.Is(err, flagfile.ErrUnknownKey):
		return fmt.Errorf("%w: %v (keys are the global flags: %s)", errUsage, err, globalList())
	}
	return fmt.Errorf("%w: %v", errUsage, err)
}

// sortedGlobals lists the global flags' names in order.
func sortedGlobals() []string {
	var names []string
	for name := range globalNames {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func globalList() string { return strings.Join(sortedGlobals(), ", ") }

// envList lists the global flags' environment variables, for the usage.
func envList() string {
	var envs []string
	for _, name := range sortedGlobals() {
		envs = append(envs, envName(name))
	}
	return strings.Join(envs, ", ")
}
