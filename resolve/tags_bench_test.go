package resolve

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
)

// BenchmarkTagPolicies resolves 10 images, each of a repository with a
// tag policy (20 tags each), on a loopback registry that answers every
// request after 50 ms, with a new Resolver per iteration as digestpin
// uses it. It reports requests per run and per image: a semver or name
// policy costs one tags/list and one HEAD per repository; latest adds a
// GET of the manifest and of the config for each of --max-tags
// candidates.
func BenchmarkTagPolicies(b *testing.B) {
	for _, strategy := range []string{"semver:~1.4", "latest"} {
		b.Run(fmt.Sprintf("images=10/strategy=%s/latency=50ms", strategy), func(b *testing.B) {
			reg := testregistry.New(b)
			var ps tagpolicy.TagPolicies
			refs := make([]name.Reference, 10)
			for i := range refs {
				repo := fmt.Sprintf("team/service%d", i)
				for p := range 20 {
					reg.PushImage(b, fmt.Sprintf("%s:1.%d.%d", repo, p/5+2, p%5))
				}
				if err := ps.Add(reg.Ref(repo), strategy); err != nil {
					b.Fatal(err)
				}
				ref, err := name.ParseReference(reg.Ref(repo + ":1.4"))
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
				pr, err := tagpolicy.NewPolicyResolver(r, r, &ps, tagpolicy.WithMaxTags(3))
				if err != nil {
					b.Fatal(err)
				}
				var wg sync.WaitGroup
				for _, ref := range refs {
					wg.Go(func() {
						if _, err := pr.Resolve(context.Background(), ref); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				runs++
			}
			b.ReportMetric(float64(reg.Total())/float64(runs), "req/run")
			b.ReportMetric(float64(reg.Count("GET tags"))/float64(runs), "tags-list/run")
		})
	}
}
