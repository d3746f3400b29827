package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/testredis"
	"github.com/digestpin/digestpin/resolve"
)

// TestRecords: records round-trip through a real Redis, keyed apart from
// resolutions, and a foreign value under a record's key is a miss.
func TestRecords(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t, testredis.Options{})
	rc := srv.Client(0)
	defer rc.Close()
	ctx := context.Background()
	c, _ := newClient(t, Options{URL: srv.URL(0), Prefix: "test:"})
	k := newCache(t, c, time.Hour, time.Second)
	records, err := resolve.NewRecords(k, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := records.Get(ctx, "verification a"); ok {
		t.Fatal("Get on an empty server found a record")
	}
	rec := []byte(`{"Policy":"none"}`)
	if err := records.Put(ctx, "verification a", rec); err != nil {
		t.Fatal(err)
	}
	if got, ok := records.Get(ctx, "verification a"); !ok || string(got) != string(rec) {
		t.Errorf("Get = %s, %v, want %s", got, ok, rec)
	}
	if _, ok := records.Get(ctx, "verification b"); ok {
		t.Error("Get(another key) found a record")
	}
	// The record's Redis key is the one key a Put of it adds.
	keys, err := rc.Keys(ctx, "test:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys = %q, %v; want the record's alone", keys, err)
	}
	if err := rc.Set(ctx, keys[0], "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := records.Get(ctx, "verification a"); ok {
		t.Error("Get(foreign value) found a record")
	}
}
