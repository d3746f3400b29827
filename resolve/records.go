package resolve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Records keeps small JSON records by key in a Cache, each valid for a
// TTL: what was found about a digest besides the digest itself (package
// pin keeps signature verifications there, keyed by the digest, the
// policy and the trust material). It encodes, keys and ages the records
// itself, as the resolver does its entries, so any Cache keeps them: a
// DirCache in its folder, digestpin's Redis store for every process that
// shares the server. A record that cannot be read is a miss. Records is
// safe for concurrent use when its Cache is.
type Records struct {
	c   Cache
	ttl time.Duration
	now func() time.Time
}

// NewRecords returns the records kept in c for ttl, which must be
// positive.
func NewRecords(c Cache, ttl time.Duration) (*Records, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("records: TTL %s must be positive", ttl)
	}
	return &Records{c: c, ttl: ttl, now: time.Now}, nil
}

// maxRecord bounds a record's entry: a verification with its signers is
// well under 4 KiB.
const maxRecord = 64 << 10

const recordFormat = "digestpin-record-v1"

// recordEntry is a record as a Cache keeps it.
type recordEntry struct {
	Format string          `json:"format"`
	Key    string          `json:"key"`
	Record json.RawMessage `json:"record"`
	Stored time.Time       `json:"stored"`
}

// recordKey is the Cache key of the record under key: a hex SHA-256 of
// the format and the key, with a kind prefix, as the resolver's keys.
func recordKey(key string) string {
	sum := sha256.Sum256([]byte(recordFormat + "\n" + key))
	return "record:" + hex.EncodeToString(sum[:])
}

// Get returns the record stored under key when one younger than the TTL
// exists.
func (r *Records) Get(ctx context.Context, key string) ([]byte, bool) {
	read := EntryRead{Max: maxRecord, Check: func(b []byte) error {
		_, err := r.decode(b, key)
		return err
	}}
	b, ok := r.c.Get(ctx, recordKey(key), read)
	if !ok {
		return nil, false
	}
	rec, err := r.decode(b, key)
	return rec, err == nil
}

// Put stores record b (JSON) under key, now.
func (r *Records) Put(ctx context.Context, key string, b []byte) error {
	if !json.Valid(b) {
		return fmt.Errorf("encoding record %s: not JSON", key)
	}
	e, err := json.Marshal(recordEntry{Format: recordFormat, Key: key, Record: b, Stored: r.now().UTC()})
	if err != nil {
		return fmt.Errorf("encoding record %s: %w", key, err)
	}
	if len(e) > maxRecord {
		return fmt.Errorf("encoding record %s: %d bytes, more than %d", key, len(e), maxRecord)
	}
	return r.c.Put(ctx, recordKey(key), e)
}

// Last returns the record stored under key whatever its age, and when
// it was stored: one past the TTL, or stored in the future (a clock that
// went back), too. A record that is a state rather than a finding (what a
// waiting period holds, in package pin) must not vanish when the clock
// jumps; its reader judges the time itself.
func (r *Records) Last(ctx context.Context, key string) ([]byte, time.Time, bool) {
	read := EntryRead{Max: maxRecord, Check: func(b []byte) error {
		_, err := decodeRecord(b, key)
		return err
	}}
	b, ok := r.c.Get(ctx, recordKey(key), read)
	if !ok {
		return nil, time.Time{}, false
	}
	e, err := decodeRecord(b, key)
	if err != nil {
		return nil, time.Time{}, false
	}
	return e.Record, e.Stored, true
}

// decode returns the record of entry b under key when it is younger than
// the TTL; an older one is ErrCacheEntryExpired, anything else that is
// not a record of key in this format another error.
func (r *Records) decode(b []byte, key string) ([]byte, error) {
	e, err := decodeRecord(b, key)
	if err != nil {
		return nil, err
	}
	if age := r.now().Sub(e.Stored); age < 0 || age >= r.ttl {
		return nil, ErrCacheEntryExpired
	}
	return e.Record, nil
}

// decodeRecord returns entry b when it is a record of key in this
// format, whatever its age.
func decodeRecord(b []byte, key string) (recordEntry, error) {
	var e recordEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return recordEntry{}, fmt.Errorf("not a record: %w", err)
	}
	switch {
	case e.Format != recordFormat:
		return recordEntry{}, fmt.Errorf("record of format %q, want %q", e.Format, recordFormat)
	case e.Key != key:
		return recordEntry{}, fmt.Errorf("record of another key")
	}
	return e, nil
}
