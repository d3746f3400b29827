package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/testredis"
)

// TestRecords: records round-trip through a real Redis, keyed apart from
// resolutions, and a foreign value under a record's key is a miss.
func TestRecords(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	rc := srv.Client(0)
	defer rc.Close()
	ctx := context.Background()
	c, _ := newClient(t, Options{URL: srv.URL(0), Prefix: "test:"})
	k := newCache(t, c, time.Hour, time.Second)
	if _, ok := k.GetRecord(ctx, "verification a"); ok {
		t.Fatal("GetRecord on an empty server found a record")
	}
	rec := []byte(`{"Policy":"none"}`)
	if err := k.PutRecord(ctx, "verification a", rec); err != nil {
		t.Fatal(err)
	}
	if got, ok := k.GetRecord(ctx, "verification a"); !ok || string(got) != string(rec) {
		t.Errorf("GetRecord = %s, %v, want %s", got, ok, rec)
	}
	if _, ok := k.GetRecord(ctx, "verification b"); ok {
		t.Error("GetRecord(another key) found a record")
	}
	if err := rc.Set(ctx, k.recordKey("verification a"), "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := k.GetRecord(ctx, "verification a"); ok {
		t.Error("GetRecord(foreign value) found a record")
	}
}
