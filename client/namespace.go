package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Stat is a node's metadata: revisions, times, versions, ephemeral owner.
type Stat = namespace.Stat

// maxRecursiveRetries bounds how often a recursive Delete starts over when
// children keep appearing under the node it deletes.
const maxRecursiveRetries = 16

// Create creates path with data and returns the path created (with the
// sequence suffix when Sequential). An Ephemeral node belongs to the
// default session; use Session.Create for another. Errors: ErrNodeExists,
// ErrNoNode (no parent), ErrEphemeralParent, ErrBadPath, ErrDataTooLarge,
// ErrSessionExpired (ephemeral on an ended session), ErrUnknownOutcome.
func (c *Client) Create(ctx context.Context, path string, data []byte, opts ...CreateOption) (string, error) {
	o := buildCreate(opts)
	var s *Session
	if o.flags&namespace.FlagEphemeral != 0 {
		if s = c.Session(); s == nil {
			return "", fmt.Errorf("latch: create %s: %w", path, ErrSessionClosed)
		}
	}
	return c.create(ctx, s, path, data, o)
}

func (c *Client) create(ctx context.Context, s *Session, path string, data []byte, o createOptions) (string, error) {
	resp, err := c.do(ctx, s, &session.Request{Type: session.MsgCreate, Path: path, Data: data, Flags: o.flags})
	if err != nil {
		return "", err
	}
	return resp.Path, nil
}

// Get returns path's data and metadata. Errors: ErrNoNode, ErrBadPath.
func (c *Client) Get(ctx context.Context, path string, opts ...ReadOption) ([]byte, Stat, error) {
	o := buildRead(opts)
	if o.cached {
		e, err := c.cache.read(ctx, path)
		if err != nil {
			return nil, Stat{}, err
		}
		if !e.exists {
			return nil, Stat{}, fmt.Errorf("%w: %s", ErrNoNode, path)
		}
		return e.data, e.stat, nil
	}
	resp, err := c.read(ctx, o, &session.Request{Type: session.MsgGet, Path: path})
	if err != nil {
		return nil, Stat{}, err
	}
	return resp.Data, resp.Stat, nil
}

// Set replaces path's data and returns the new metadata, acting as the
// default session while it lives (so it may change that session's
// ephemerals; another session's need Session.Set or an admin). With
// WithVersion(v) it fails with ErrBadVersion unless the version is v.
// Errors: ErrNoNode, ErrBadVersion, ErrDataTooLarge, ErrUnknownOutcome.
func (c *Client) Set(ctx context.Context, path string, data []byte, opts ...SetOption) (Stat, error) {
	return c.set(ctx, c.owner(), path, data, opts)
}

func (c *Client) set(ctx context.Context, s *Session, path string, data []byte, opts []SetOption) (Stat, error) {
	o, err := buildSet(opts)
	if err != nil {
		return Stat{}, err
	}
	resp, err := c.do(ctx, s, &session.Request{Type: session.MsgSet, Path: path, Data: data, Version: o.version})
	if err != nil {
		return Stat{}, err
	}
	return resp.Stat, nil
}

// Delete removes path, acting as the default session while it lives
// (see Set). With WithVersion(v) it fails with ErrBadVersion
// unless the version is v. Without Recursive a node with children fails
// with ErrNotEmpty; with Recursive the subtree goes first, child by child
// (not atomically: a reader may see it half deleted, and nodes created
// meanwhile are deleted too). Errors: ErrNoNode, ErrBadVersion,
// ErrNotEmpty, ErrRootImmutable, ErrUnknownOutcome.
func (c *Client) Delete(ctx context.Context, path string, opts ...DeleteOption) error {
	o, err := buildDelete(opts)
	if err != nil {
		return err
	}
	if o.recursive {
		return c.deleteTree(ctx, path, o.version)
	}
	return c.delete(ctx, path, o.version)
}

func (c *Client) delete(ctx context.Context, path string, version int64) error {
	return c.deleteAs(ctx, c.owner(), path, version)
}

// deleteAs deletes path as session s (nil: no session).
func (c *Client) deleteAs(ctx context.Context, s *Session, path string, version int64) error {
	_, err := c.do(ctx, s, &session.Request{Type: session.MsgDelete, Path: path, Version: version})
	return err
}

// deleteTree deletes path's subtree depth first, then path. The version is
// checked before anything is deleted, and again by the final delete.
func (c *Client) deleteTree(ctx context.Context, path string, version int64) error {
	if version != namespace.AnyVersion {
		st, err := c.Stat(ctx, path)
		if err != nil {
			return err
		}
		if st.Version != version {
			return fmt.Errorf("%w: %s has version %d, not %d", ErrBadVersion, path, st.Version, version)
		}
	}
	for range maxRecursiveRetries {
		names, err := c.Children(ctx, path)
		if err != nil {
			return err
		}
		for _, name := range names {
			err := c.deleteTree(ctx, join(path, name), namespace.AnyVersion)
			if err != nil && !errors.Is(err, ErrNoNode) {
				return err
			}
		}
		err = c.delete(ctx, path, version)
		if !errors.Is(err, ErrNotEmpty) {
			return err
		}
	}
	return fmt.Errorf("%w: %s: children keep appearing", ErrNotEmpty, path)
}

func join(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}

// Stat returns path's metadata. Errors: ErrNoNode, ErrBadPath.
func (c *Client) Stat(ctx context.Context, path string, opts ...ReadOption) (Stat, error) {
	o := buildRead(opts)
	if o.cached {
		e, err := c.cache.read(ctx, path)
		if err != nil {
			return Stat{}, err
		}
		if !e.exists {
			return Stat{}, fmt.Errorf("%w: %s", ErrNoNode, path)
		}
		return e.stat, nil
	}
	resp, err := c.read(ctx, o, &session.Request{Type: session.MsgStat, Path: path})
	if err != nil {
		return Stat{}, err
	}
	return resp.Stat, nil
}

// Exists reports whether path exists, with its metadata when it does.
func (c *Client) Exists(ctx context.Context, path string, opts ...ReadOption) (bool, Stat, error) {
	o := buildRead(opts)
	if o.cached {
		e, err := c.cache.read(ctx, path)
		if err != nil {
			return false, Stat{}, err
		}
		return e.exists, e.stat, nil
	}
	resp, err := c.read(ctx, o, &session.Request{Type: session.MsgExists, Path: path})
	if err != nil {
		return false, Stat{}, err
	}
	return resp.Exists, resp.Stat, nil
}

// read sends a read to the leader, or with Stale to the read member.
func (c *Client) read(ctx context.Context, o readOptions, req *session.Request) (*session.Response, error) {
	if o.stale {
		return c.staleDo(ctx, req)
	}
	return c.do(ctx, nil, req)
}

// Children returns the names (not paths) of path's children, sorted. It
// reads page after page until the end or Limit; each page is consistent,
// the whole listing need not be (children created or deleted between
// pages may be missed or seen). Errors: ErrNoNode, ErrBadPath.
func (c *Client) Children(ctx context.Context, path string, opts ...ChildrenOption) ([]string, error) {
	o := buildChildren(opts)
	var names []string
	after := o.after
	for {
		req := &session.Request{Type: session.MsgChildren, Path: path, After: after}
		if o.limit > 0 {
			req.Limit = int32(min(o.limit-len(names), 1<<30))
		}
		resp, err := c.read(ctx, readOptions{stale: o.stale}, req)
		if err != nil {
			return nil, err
		}
		names = append(names, resp.Names...)
		if o.limit > 0 && len(names) >= o.limit {
			return names[:o.limit], nil
		}
		if !resp.More || len(resp.Names) == 0 {
			return names, nil
		}
		after = resp.Names[len(resp.Names)-1]
	}
}

// Sync returns once the leader has applied every write committed before
// the call, and raises the client's revision to it, so a Stale read after
// it (on any member) sees them.
func (c *Client) Sync(ctx context.Context) error {
	_, err := c.do(ctx, nil, &session.Request{Type: session.MsgSync})
	return err
}
