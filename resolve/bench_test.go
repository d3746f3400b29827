package resolve

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// BenchmarkResolve resolves N distinct references on a loopback registry
// that answers every request after 50 ms, all at once as the renderer
// asks, with a new Resolver per iteration (one per run, as digestpin
// uses it). It reports requests per distinct image.
func BenchmarkResolve(b *testing.B) {
	for _, n := range []int{10, 40, 160} {
		b.Run(fmt.Sprintf("images=%d/latency=50ms", n), func(b *testing.B) {
			reg := testregistry.New(b)
			refs := make([]name.Reference, n)
			for i := range refs {
				repo := fmt.Sprintf("team%d/service%d:1.0", i%7, i)
				reg.PushImage(b, repo)
				ref, err := name.ParseReference(reg.Ref(repo))
				if err != nil {
					b.Fatal(err)
				}
				refs[i] = ref
			}
			reg.SetLatency(50 * time.Millisecond)
			reg.ResetCounts()
			runs := 0
			for b.Loop() {
				r, err := New()
				if err != nil {
					b.Fatal(err)
				}
				var wg sync.WaitGroup
				for _, ref := range refs {
					wg.Go(func() {
						if _, err := r.Resolve(context.Background(), ref); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				runs++
			}
			per := float64(runs * n)
			b.ReportMetric(float64(reg.Manifests())/per, "manifest-req/image")
			b.ReportMetric(float64(reg.Total())/per, "req/image")
		})
	}
}
