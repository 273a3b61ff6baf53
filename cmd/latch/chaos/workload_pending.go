package chaos

import (
	"context"
	"errors"
)

// errNoRecipes: the client lock recipes (Mutex, RWMutex, Election) have
// not landed in package client yet; the locks and election workloads are
// written against them as soon as they do.
var errNoRecipes = errors.New("latch: chaos: the client has no lock recipes yet")

func (w *worker) runLocks(ctx context.Context) error    { return errNoRecipes }
func (w *worker) runElection(ctx context.Context) error { return errNoRecipes }
