package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// TestCellMapAdminOnly: in a map cell of three real latchd processes
// with mutual TLS, where the default gives every identity read, write,
// create and delete, an identity that is not an admin can neither write
// the cell map nor anything below it (the cell's Apply refuses it), an
// admin can, a Cells client follows the admin's map, and a map that lacks
// its own map cell is refused by the client, which keeps the last one.
func TestCellMapAdminOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	ca := newClientCA(t)
	c := proc.StartCluster(t, 3, "--cell", "m", "--tls-client-ca", ca.File, "--admins", "ops", "--acl-default", "allow")
	c.WaitLeader(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ops := mustDialAs(t, c, ca, "ops")
	waitEnforced(t, ops)
	mallory := mustDialAs(t, c, ca, "mallory")
	node := CellMapNode("m")
	eps := endpoints(c)

	// mallory has every right but admin on the map cell ...
	if _, err := mallory.Create(ctx, "/m/mine", []byte("x")); err != nil {
		t.Fatalf("mallory's ordinary create: %v", err)
	}
	// ... and still cannot publish a map, create, set or delete the node.
	evil := CellMap{"m": {"127.0.0.1:1"}}
	if err := PublishCellMap(ctx, mallory, "m", evil); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("a non-admin published the cell map: %v", err)
	}
	if _, err := mallory.Create(ctx, node, evil.Encode()); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("a non-admin created the cell map node: %v", err)
	}
	if err := PublishCellMap(ctx, ops, "m", CellMap{"m": eps, "z": {"127.0.0.1:1"}}); err != nil {
		t.Fatalf("the admin's publish: %v", err)
	}
	if _, err := mallory.Set(ctx, node, evil.Encode()); !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), "cell map") {
		t.Fatalf("a non-admin set the cell map: %v", err)
	}
	if err := mallory.Delete(ctx, node); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("a non-admin deleted the cell map: %v", err)
	}
	if _, err := mallory.Create(ctx, node+"/x", nil); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("a non-admin created below the cell map: %v", err)
	}
	if _, err := mallory.Multi(ctx, OpSet(node, evil.Encode())); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("a non-admin set the cell map in a multi: %v", err)
	}
	if d, _, err := mallory.Get(ctx, node); err != nil || !strings.Contains(string(d), `"z"`) {
		t.Fatalf("the map after the attempts: %q %v", d, err)
	}

	// A client of the map cell (as mallory, who may read it) follows the
	// admin's map.
	x, err := DialCells(ctx, CellsConfig{Config: mallory.cfg, Map: CellMap{"m": eps}, MapCell: "m"})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if _, ok := x.Map()["z"]; !ok {
		t.Fatalf("the client did not read the admin's map: %v", x.Map())
	}

	// A map without its map cell: PublishCellMap refuses to write it, and
	// a client that reads one (written by hand) keeps the last good map.
	lost := CellMap{"y": {"127.0.0.1:2"}}
	if err := PublishCellMap(ctx, ops, "m", lost); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("publishing a map without its map cell: %v", err)
	}
	if _, err := ops.Set(ctx, node, lost.Encode()); err != nil {
		t.Fatal(err)
	}
	mc, err := x.Client(ctx, "/m")
	if err != nil {
		t.Fatal(err)
	}
	if err := x.refresh(ctx, mc); err != nil {
		t.Fatal(err)
	}
	if m := x.Map(); m["m"] == nil || m["y"] != nil {
		t.Fatalf("the client took a map that lacks its map cell: %v", m)
	}
}
