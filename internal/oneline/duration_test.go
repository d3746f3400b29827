package oneline

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{24 * time.Hour: "24h", 90 * time.Minute: "1h30m", 5 * time.Minute: "5m", 45 * time.Second: "45s", time.Hour + time.Second: "1h0m1s", 1500 * time.Millisecond: "2s", 5 * time.Millisecond: "5ms"} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%s) = %q, want %q", d, got, want)
		}
	}
}
