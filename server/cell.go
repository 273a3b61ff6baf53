package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// checkCell refuses a request naming a path outside this member's cell
// (Config.Cell) with session.ErrWrongCell, before any handler runs: such a
// request is never proposed, read or watched. Every path a request names
// is checked (Path, each op of a Multi, each compare and op of a Txn, a
// lock request Node, a Sequencer's Path). A member of no cell serves every path.
func (f *front) checkCell(req *session.Request) error {
	cell := f.s.cfg.Cell
	if cell == "" {
		return nil
	}
	in := func(p string) error {
		if p == "" || session.InCell(p, cell) {
			return nil
		}
		return session.WrongCell(p, cell)
	}
	if err := in(req.Path); err != nil {
		return err
	}
	if err := in(req.Node); err != nil {
		return err
	}
	if req.Sequencer != nil {
		if err := in(req.Sequencer.Path); err != nil {
			return err
		}
	}
	for i := range req.Ops {
		if err := in(req.Ops[i].Path); err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
	}
	for i := range req.Else {
		if err := in(req.Else[i].Path); err != nil {
			return fmt.Errorf("else op %d: %w", i, err)
		}
	}
	for i := range req.Compares {
		if err := in(req.Compares[i].Path); err != nil {
			return fmt.Errorf("compare %d: %w", i, err)
		}
	}
	return nil
}

// bootstrapCell makes the leader create the cell's root node /Cell when it
// is missing, before it is ready, so that clients can create and lock
// below it at once. Two leaders racing both succeed: the second finds it.
func (s *Server) bootstrapCell(ctx context.Context) error {
	if s.cfg.Cell == "" {
		return nil
	}
	root := "/" + s.cfg.Cell
	if ok, _, err := s.store.Exists(root); err != nil || ok {
		return err
	}
	res, err := s.Propose(ctx, &namespace.Command{Op: namespace.OpCreate, Path: root})
	if err == nil {
		err = res.Err
	}
	if err != nil && !errors.Is(err, namespace.ErrNodeExists) {
		return fmt.Errorf("cell root %s: %w", root, err)
	}
	return nil
}
