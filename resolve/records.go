package resolve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/digestpin/digestpin/internal/atomicfile"
)

// RecordCache is a Cache that also keeps small records by key, for its
// TTL: what was found about a digest besides the digest itself (package
// pin keeps signature verifications there, keyed by the digest, the
// policy and the trust material). DirCache and digestpin's Redis store
// are RecordCaches. A record that cannot be read is a miss.
type RecordCache interface {
	Cache
	// GetRecord returns the record stored under key when one younger
	// than the TTL exists.
	GetRecord(ctx context.Context, key string) ([]byte, bool)
	// PutRecord stores b under key, now.
	PutRecord(ctx context.Context, key string, b []byte) error
}

var _ RecordCache = (*DirCache)(nil)

// MaxRecord bounds a record: a verification with its signers is well
// under 4 KiB.
const MaxRecord = 64 << 10

const recordFormat = "digestpin-record-v1"

// recordEntry is a record as a Cache keeps it.
type recordEntry struct {
	Format string          `json:"format"`
	Key    string          `json:"key"`
	Record json.RawMessage `json:"record"`
	Stored time.Time       `json:"stored"`
}

// RecordEntryID names the record under key, for every RecordCache.
func RecordEntryID(key string) string {
	sum := sha256.Sum256([]byte(recordFormat + "\n" + key))
	return hex.EncodeToString(sum[:])
}

// EncodeRecordEntry returns the entry of record b (JSON) under key,
// stored at t.
func EncodeRecordEntry(key string, b []byte, t time.Time) ([]byte, error) {
	if !json.Valid(b) {
		return nil, fmt.Errorf("encoding record %s: not JSON", key)
	}
	e, err := json.Marshal(recordEntry{Format: recordFormat, Key: key, Record: b, Stored: t.UTC()})
	if err != nil {
		return nil, fmt.Errorf("encoding record %s: %w", key, err)
	}
	if len(e) > MaxRecord {
		return nil, fmt.Errorf("encoding record %s: %d bytes, more than %d", key, len(e), MaxRecord)
	}
	return e, nil
}

// DecodeRecordEntry returns the record of entry b, written by
// EncodeRecordEntry under key, when it is younger than ttl at now; an
// older one is ErrCacheEntryExpired.
func DecodeRecordEntry(b []byte, key string, now time.Time, ttl time.Duration) ([]byte, error) {
	var e recordEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("not a record: %w", err)
	}
	switch {
	case e.Format != recordFormat:
		return nil, fmt.Errorf("record of format %q, want %q", e.Format, recordFormat)
	case e.Key != key:
		return nil, fmt.Errorf("record of another key")
	}
	if age := now.Sub(e.Stored); age < 0 || age >= ttl {
		return nil, ErrCacheEntryExpired
	}
	return e.Record, nil
}

// GetRecord implements RecordCache.
func (c *DirCache) GetRecord(_ context.Context, key string) ([]byte, bool) {
	b, err := readSmallFile(c.recordPath(key), MaxRecord, false)
	if err != nil {
		return nil, false
	}
	r, err := DecodeRecordEntry(b, key, c.now(), c.ttl)
	if err != nil {
		return nil, false
	}
	return r, true
}

// PutRecord implements RecordCache.
func (c *DirCache) PutRecord(_ context.Context, key string, b []byte) error {
	e, err := EncodeRecordEntry(key, b, c.now())
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(c.recordPath(key), e, 0o644); err != nil {
		return fmt.Errorf("writing record: %w", err)
	}
	return nil
}

func (c *DirCache) recordPath(key string) string {
	return filepath.Join(c.dir, "record-"+RecordEntryID(key)+".json")
}
