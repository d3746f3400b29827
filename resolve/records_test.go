package resolve

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRecords: records round-trip through a DirCache, apart from other
// keys, and age out with the TTL; what is no record is refused or missed.
func TestRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dc, err := NewDirCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewRecords(dc, 0); err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Errorf("NewRecords(ttl 0) = %v, want it refused", err)
	}
	r, err := NewRecords(dc, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	rec := []byte(`{"policy":"none"}`)
	if _, ok := r.Get(ctx, "a"); ok {
		t.Fatal("Get on an empty cache found a record")
	}
	if err := r.Put(ctx, "a", rec); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key   string
		after time.Duration
		want  bool
	}{
		{"a", 0, true},
		{"a", 59 * time.Minute, true},
		{"b", 0, false},
		{"a", time.Hour, false},
		{"a", -time.Minute, false}, // stored in the future: a clock that went back
	} {
		r.now = func() time.Time { return now.Add(tc.after) }
		got, ok := r.Get(ctx, tc.key)
		if ok != tc.want || (ok && string(got) != string(rec)) {
			t.Errorf("Get(%q) %s later = %s, %v; want found %v", tc.key, tc.after, got, ok, tc.want)
		}
		// Last finds the record of its key at any age, and says when
		// it was stored.
		got, stored, ok := r.Last(ctx, tc.key)
		if want := tc.key == "a"; ok != want || (ok && (string(got) != string(rec) || !stored.Equal(now))) {
			t.Errorf("Last(%q) %s later = %s, %s, %v; want found %v, stored %s", tc.key, tc.after, got, stored, ok, want, now)
		}
	}
	// A resolution cached under the same words is no record.
	if err := dc.Put(ctx, recordKey("c"), []byte(`{"format":"digestpin-cache-v2"}`)); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Get(ctx, "c"); ok {
		t.Error("Get of an entry of another format found a record")
	}
	if _, _, ok := r.Last(ctx, "c"); ok {
		t.Error("Last of an entry of another format found a record")
	}
	for _, tc := range []struct {
		b    []byte
		want string
	}{
		{[]byte("not json"), "not JSON"},
		{[]byte(`"` + strings.Repeat("x", maxRecord) + `"`), "more than"},
	} {
		if err := r.Put(ctx, "d", tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Put(%.20q) = %v, want %q", tc.b, err, tc.want)
		}
	}
}
