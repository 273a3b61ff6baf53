package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/latch-io/latch/client"
)

func init() {
	register(&command{
		name:    "cells",
		usage:   "[publish MAPCELL]",
		summary: "show the --cells map, or publish it as the replicated map of cell MAPCELL",
		help: `Without arguments: the cells of the --cells file and their endpoints.
"publish MAPCELL" writes that map to /MAPCELL/cells in cell MAPCELL, where
clients started with that map cell read it and watch it for changes.`,
		maxArgs: 2,
		setup: func(fs *flag.FlagSet) runFunc {
			return func(ctx context.Context, e *env, args []string) error {
				if e.g.cells == "" {
					return fmt.Errorf("%w: cells needs --cells FILE (or LATCH_CELLS)", errUsage)
				}
				m, err := client.ReadCellMapFile(e.g.cells)
				if err != nil {
					return fmt.Errorf("%w: --cells: %v", errUsage, err)
				}
				switch {
				case len(args) == 0:
					return e.emit(map[string]any{"cells": m}, func(w io.Writer) {
						for _, name := range slices.Sorted(maps.Keys(m)) {
							fmt.Fprintf(w, "%s\t%s\n", name, strings.Join(m[name], ","))
						}
					})
				case len(args) == 2 && args[0] == "publish":
					ctx, cancel := e.withTimeout(ctx)
					defer cancel()
					c, err := e.clientFor(ctx, []string{"/" + args[1]})
					if err != nil {
						return err
					}
					if err := client.PublishCellMap(ctx, c, args[1], m); err != nil {
						return err
					}
					return e.emit(map[string]any{"published": client.CellMapNode(args[1])}, func(w io.Writer) {
						fmt.Fprintf(w, "published %s\n", client.CellMapNode(args[1]))
					})
				}
				return fmt.Errorf("%w: cells takes no argument or publish MAPCELL", errUsage)
			}
		},
	})
}
