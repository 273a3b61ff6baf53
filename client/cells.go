package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// ErrCrossCell: a request spans cells (a multi whose ops name paths of
// two cells, a watch on "/"); each cell is its own raft group, so nothing
// is atomic or ordered across them. Split the request per cell.
var ErrCrossCell = errors.New("latch: the request spans cells: split it per cell")

// CellMap names the cells of a namespace and each cell's client
// endpoints (any members of it): cell "a" serves /a and the paths below.
type CellMap map[string][]string

// CellMapNode is the node of the map cell that holds the replicated cell
// map, JSON-encoded: /<mapcell>/latch-cellmap. The name is reserved
// (namespace.CellMapName): once ACLs are enforced only an admin may
// write it, so a map read from it was written by an admin.
func CellMapNode(mapCell string) string { return "/" + mapCell + "/" + namespace.CellMapName }

// Validate checks that every cell name is one path component and has
// endpoints.
func (m CellMap) Validate() error {
	if len(m) == 0 {
		return fmt.Errorf("%w: the cell map names no cell", ErrBadConfig)
	}
	for name, eps := range m {
		if name == "" || session.CellOf("/"+name) != name || name == "." || name == ".." {
			return fmt.Errorf("%w: cell map: %q is not one path component", ErrBadConfig, name)
		}
		if len(eps) == 0 {
			return fmt.Errorf("%w: cell map: cell %q has no endpoints", ErrBadConfig, name)
		}
	}
	return nil
}

// ParseCellMap reads a cell map: a JSON object {"cells": {"a": ["host:7420", ...], ...}}.
func ParseCellMap(b []byte) (CellMap, error) {
	var f struct {
		Cells CellMap `json:"cells"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: cell map: %v", ErrBadConfig, err)
	}
	if err := f.Cells.Validate(); err != nil {
		return nil, err
	}
	return f.Cells, nil
}

// checkMapCell validates m as the map of the map cell mapCell: a map that
// lacks its own map cell would leave its readers no way to find the next
// map.
func (m CellMap) checkMapCell(mapCell string) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if _, ok := m[mapCell]; !ok {
		return fmt.Errorf("%w: the cell map lacks its map cell %q", ErrBadConfig, mapCell)
	}
	return nil
}

// ReadCellMapFile reads a cell map file (ParseCellMap).
func ReadCellMapFile(path string) (CellMap, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: cell map: %v", ErrBadConfig, err)
	}
	return ParseCellMap(b)
}

// Encode returns the map in ParseCellMap's format.
func (m CellMap) Encode() []byte {
	b, _ := json.Marshal(struct {
		Cells CellMap `json:"cells"`
	}{m})
	return b
}

// PublishCellMap writes m to CellMapNode(mapCell) through c, a client of
// the map cell, creating the node the first time: running Cells clients
// whose MapCell is mapCell pick it up by watch. c's identity must be an
// admin (ErrPermissionDenied otherwise), and m must name the map cell.
func PublishCellMap(ctx context.Context, c *Client, mapCell string, m CellMap) error {
	if err := m.checkMapCell(mapCell); err != nil {
		return err
	}
	p := CellMapNode(mapCell)
	_, err := c.Set(ctx, p, m.Encode())
	if errors.Is(err, ErrNoNode) {
		_, err = c.Create(ctx, p, m.Encode())
	}
	return err
}

// CellsConfig configures a Cells client.
type CellsConfig struct {
	// Config applies to the client of every cell, with the cell's
	// endpoints from the map; its Endpoints are not used.
	Config
	// Map is the cell map to start from. Required.
	Map CellMap
	// MapCell, when set, names the cell whose node CellMapNode(MapCell)
	// holds the replicated map: DialCells reads it (falling back to Map
	// while it is missing) and a watch keeps it current. While the map
	// cell is unreachable the client keeps the last map it read.
	MapCell string
}

// Cells is a client of a namespace split into cells: it routes each
// request by its path's first component to that cell's Client, dialed the
// first time the cell is used (a cell never used is never contacted). Each
// cell's Client holds its own default session; locks in two cells are two
// sessions' locks. Sequencers name their path, so CheckSequencer goes to
// the lock's cell.
type Cells struct {
	cfg    CellsConfig
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	m       CellMap
	clients map[string]*cellClient
	closed  bool
}

// cellClient is one cell's Client, dialed once by whoever needs it first.
type cellClient struct {
	done chan struct{} // closed when the dial ended; c and err are set
	c    *Client
	err  error
}

// DialCells returns a Cells client. It contacts no cell except the map
// cell (when MapCell is set).
func DialCells(ctx context.Context, cfg CellsConfig) (*Cells, error) {
	if err := cfg.Map.Validate(); err != nil {
		return nil, err
	}
	if cfg.MapCell != "" {
		if _, ok := cfg.Map[cfg.MapCell]; !ok {
			return nil, fmt.Errorf("%w: the map cell %q is not in the cell map", ErrBadConfig, cfg.MapCell)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = DefaultConfig().Logger
	}
	x := &Cells{cfg: cfg, m: maps.Clone(cfg.Map), clients: map[string]*cellClient{}}
	x.ctx, x.cancel = context.WithCancel(context.Background())
	if cfg.MapCell != "" {
		mc, err := x.cell(ctx, cfg.MapCell)
		if err != nil {
			x.Close()
			return nil, err
		}
		if err := x.refresh(ctx, mc); err != nil && !errors.Is(err, ErrNoNode) {
			x.Close()
			return nil, err
		}
		x.wg.Add(1)
		go x.followMap(mc)
	}
	return x, nil
}

// Map returns the cell map in use.
func (x *Cells) Map() CellMap {
	x.mu.Lock()
	defer x.mu.Unlock()
	return maps.Clone(x.m)
}

// Dialed returns the cells this client has dialed, sorted.
func (x *Cells) Dialed() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Sorted(maps.Keys(x.clients))
}

// Client returns the Client of the cell path belongs to, dialing it the
// first time. A path of no cell ("/") or of a cell missing from the map
// fails with session.ErrWrongCell.
func (x *Cells) Client(ctx context.Context, path string) (*Client, error) {
	name := session.CellOf(path)
	if name == "" {
		return nil, fmt.Errorf("%w: %s belongs to no cell: use a path under /CELL/", session.ErrWrongCell, path)
	}
	return x.cell(ctx, name)
}

// cell returns cell name's Client, dialing it once.
func (x *Cells) cell(ctx context.Context, name string) (*Client, error) {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil, ErrClosed
	}
	eps, ok := x.m[name]
	cc := x.clients[name]
	if !ok && cc == nil {
		x.mu.Unlock()
		return nil, fmt.Errorf("%w: cell %q is not in the cell map", session.ErrWrongCell, name)
	}
	if cc == nil {
		// The caller that makes the entry dials; later callers wait on
		// done. Close waits on done too.
		cc = &cellClient{done: make(chan struct{})}
		x.clients[name] = cc
		go func() {
			cfg := x.cfg.Config
			cfg.Endpoints = slices.Clone(eps)
			c, err := Dial(x.ctx, cfg)
			x.mu.Lock()
			cc.c, cc.err = c, err
			if err != nil && x.clients[name] == cc {
				delete(x.clients, name) // the next use dials again
			}
			x.mu.Unlock()
			close(cc.done)
		}()
	}
	x.mu.Unlock()
	select {
	case <-cc.done:
		return cc.c, cc.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Session returns the default session of path's cell (for NewMutex and
// the other recipes on a path of that cell).
func (x *Cells) Session(ctx context.Context, path string) (*Session, error) {
	c, err := x.Client(ctx, path)
	if err != nil {
		return nil, err
	}
	return c.Session(), nil
}

// NewMutex is NewMutex on path with its cell's default session.
func (x *Cells) NewMutex(ctx context.Context, path string, opts ...LockOption) (*Mutex, error) {
	s, err := x.Session(ctx, path)
	if err != nil {
		return nil, err
	}
	return NewMutex(s, path, opts...), nil
}

// Create is Client.Create in path's cell.
func (x *Cells) Create(ctx context.Context, path string, data []byte, opts ...CreateOption) (string, error) {
	c, err := x.Client(ctx, path)
	if err != nil {
		return "", err
	}
	return c.Create(ctx, path, data, opts...)
}

// Get is Client.Get in path's cell.
func (x *Cells) Get(ctx context.Context, path string, opts ...ReadOption) ([]byte, Stat, error) {
	c, err := x.Client(ctx, path)
	if err != nil {
		return nil, Stat{}, err
	}
	return c.Get(ctx, path, opts...)
}

// Set is Client.Set in path's cell.
func (x *Cells) Set(ctx context.Context, path string, data []byte, opts ...SetOption) (Stat, error) {
	c, err := x.Client(ctx, path)
	if err != nil {
		return Stat{}, err
	}
	return c.Set(ctx, path, data, opts...)
}

// Delete is Client.Delete in path's cell.
func (x *Cells) Delete(ctx context.Context, path string, opts ...DeleteOption) error {
	c, err := x.Client(ctx, path)
	if err != nil {
		return err
	}
	return c.Delete(ctx, path, opts...)
}

// Exists is Client.Exists in path's cell.
func (x *Cells) Exists(ctx context.Context, path string, opts ...ReadOption) (bool, Stat, error) {
	c, err := x.Client(ctx, path)
	if err != nil {
		return false, Stat{}, err
	}
	return c.Exists(ctx, path, opts...)
}

// Children is Client.Children in path's cell. The children of "/" are
// the cells of the map (no member is asked).
func (x *Cells) Children(ctx context.Context, path string, opts ...ChildrenOption) ([]string, error) {
	if path == "/" {
		names := slices.Collect(maps.Keys(x.Map()))
		sort.Strings(names)
		return names, nil
	}
	c, err := x.Client(ctx, path)
	if err != nil {
		return nil, err
	}
	return c.Children(ctx, path, opts...)
}

// Watch is Client.Watch in path's cell. A watch on "/" would span cells
// and fails with ErrCrossCell: watch each cell's root instead.
func (x *Cells) Watch(ctx context.Context, path string, opts ...WatchOption) (*Watcher, error) {
	if path == "/" {
		return nil, fmt.Errorf("%w: a watch on / covers every cell; watch /CELL in each cell", ErrCrossCell)
	}
	c, err := x.Client(ctx, path)
	if err != nil {
		return nil, err
	}
	return c.Watch(ctx, path, opts...)
}

// Multi is Client.Multi in the cell of its ops; ops of two cells fail
// with ErrCrossCell before anything is sent.
func (x *Cells) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	if len(ops) == 0 {
		return nil, fmt.Errorf("%w: a multi needs ops", ErrBadConfig)
	}
	first := ops[0].op.Path
	for _, op := range ops[1:] {
		if a, b := session.CellOf(first), session.CellOf(op.op.Path); a != b {
			return nil, fmt.Errorf("%w: a multi is atomic within one cell; %s is in cell %q, %s in cell %q",
				ErrCrossCell, first, a, op.op.Path, b)
		}
	}
	c, err := x.Client(ctx, first)
	if err != nil {
		return nil, err
	}
	return c.Multi(ctx, ops...)
}

// CheckSequencer asks the sequencer's cell (its path's first component).
func (x *Cells) CheckSequencer(ctx context.Context, sq Sequencer) (bool, error) {
	c, err := x.Client(ctx, sq.Path)
	if err != nil {
		return false, err
	}
	return c.CheckSequencer(ctx, sq)
}

// LockQueue is Client.LockQueue in path's cell.
func (x *Cells) LockQueue(ctx context.Context, path string, opts ...ReadOption) ([]LockInfo, error) {
	c, err := x.Client(ctx, path)
	if err != nil {
		return nil, err
	}
	return c.LockQueue(ctx, path, opts...)
}

// Close closes every cell's client.
func (x *Cells) Close() error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil
	}
	x.closed = true
	x.mu.Unlock()
	x.cancel()
	x.wg.Wait()
	x.mu.Lock()
	ccs := slices.Collect(maps.Values(x.clients))
	x.mu.Unlock()
	for _, cc := range ccs {
		<-cc.done
		if cc.c != nil {
			cc.c.Close()
		}
	}
	return nil
}

// refresh reads the replicated map from the map cell and uses it.
func (x *Cells) refresh(ctx context.Context, mc *Client) error {
	b, _, err := mc.Get(ctx, CellMapNode(x.cfg.MapCell))
	if err != nil {
		return err
	}
	m, err := ParseCellMap(b)
	if err == nil {
		err = m.checkMapCell(x.cfg.MapCell)
	}
	if err != nil {
		x.cfg.Logger.Warn("ignoring a bad replicated cell map; keeping the last one", "node", CellMapNode(x.cfg.MapCell), "err", err)
		return nil
	}
	x.mu.Lock()
	x.m = m
	x.mu.Unlock()
	return nil
}

// cellMapRetry is the pause before watching the map again after its
// watch ended (the map cell unreachable, a resync).
const cellMapRetry = 200 * time.Millisecond

// followMap keeps the map current: a watch on the map node, and a fresh
// read after each change. While the map cell is unreachable the last map
// stays in use. Cells already dialed keep their connection (their
// Clients follow their own members); the map's endpoints serve the next
// dial.
func (x *Cells) followMap(mc *Client) {
	defer x.wg.Done()
	for x.ctx.Err() == nil {
		w, err := mc.Watch(x.ctx, CellMapNode(x.cfg.MapCell))
		if err == nil {
			// Read after the watch is registered: no change falls between.
			_ = x.refresh(x.ctx, mc)
			for range w.Events() {
				if err := x.refresh(x.ctx, mc); err != nil && x.ctx.Err() == nil {
					x.cfg.Logger.Debug("reading the cell map failed; keeping the last one", "err", err)
				}
			}
			w.Close()
		}
		select {
		case <-x.ctx.Done():
		case <-time.After(cellMapRetry):
		}
	}
}
