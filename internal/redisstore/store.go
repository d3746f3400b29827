package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/digestpin/digestpin/steady"
)

// Store is a steady.Store on Redis: the previous output of each
// application under PREFIX + "state:" + its key, after a line that marks
// it as digestpin's, expiring after the TTL. An application rendered less
// often than that starts again from a first render (its output whole).
//
// The values are rendered manifests, Secrets included: the server must be
// one that may hold them (see SECURITY.md). A failure of Redis is not an
// error: Get finds nothing (a first render) and Put stores nothing, and
// the Client warns once. A value without the mark, or larger than the
// bound, is ignored with a warning. It is safe for concurrent use.
type Store struct {
	c       *Client
	ttl     time.Duration
	maxSize int64
}

var _ steady.Store = (*Store)(nil)

// stateMark begins every value a Store writes.
const stateMark = "digestpin-state-v1\n"

// Store returns the state store on c, whose values expire after ttl,
// which must be positive. maxSize bounds each value; 0 means
// steady.DefaultMaxSize.
func (c *Client) Store(ttl time.Duration, maxSize int64) (*Store, error) {
	switch {
	case ttl <= 0:
		return nil, fmt.Errorf("state TTL must be positive, got %s", ttl)
	case maxSize < 0:
		return nil, fmt.Errorf("state size bound must not be negative, got %d", maxSize)
	case maxSize == 0:
		maxSize = steady.DefaultMaxSize
	}
	return &Store{c: c, ttl: ttl, maxSize: maxSize}, nil
}

func (s *Store) key(key string) string { return s.c.prefix + "state:" + key }

// Get implements steady.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if key == "" {
		return nil, false, errors.New("reading previous output: empty key")
	}
	k := s.key(key)
	// The bound is on the whole value, the mark included.
	b, ok := s.c.get(ctx, k, len(stateMark)+int(min(s.maxSize, math.MaxInt32)))
	if !ok {
		return nil, false, nil
	}
	out, marked := bytes.CutPrefix(b, []byte(stateMark))
	if !marked {
		s.c.ignore(k, errors.New("not an output digestpin stored"))
		return nil, false, nil
	}
	return out, true, nil
}

// Put implements steady.Store. A value larger than the bound is an error,
// as it is for steady.DirStore.
func (s *Store) Put(ctx context.Context, key string, b []byte) error {
	if key == "" {
		return errors.New("storing output: empty key")
	}
	if int64(len(b)) > s.maxSize {
		return fmt.Errorf("storing output of %q: %d bytes, more than %d", key, len(b), s.maxSize)
	}
	v := make([]byte, 0, len(stateMark)+len(b))
	v = append(append(v, stateMark...), b...)
	s.c.set(ctx, s.key(key), v, s.ttl)
	return nil
}
