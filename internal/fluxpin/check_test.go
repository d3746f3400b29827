package fluxpin

import (
	"reflect"
	"strings"
	"testing"
)

// TestCheck: what runs with digestpin's entries written must run each
// image at the digest resolved for it.
func TestCheck(t *testing.T) {
	t.Parallel()
	da, db := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	resolved := map[string]string{"reg.example/app:1.0": da, "redis": db, "quay.io/x@" + db: db}
	pod := func(images ...string) string {
		s := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  initContainers: [{name: i, image: \"quay.io/x@" + db + "\"}]\n  containers:\n"
		for _, im := range images {
			s += "    - {name: c, image: \"" + im + "\"}\n"
		}
		return s
	}
	for _, tc := range []struct {
		name, final, err string
	}{
		{name: "all pinned", final: pod("reg.example/app:1.0@"+da, "redis@"+db) + "---\n" + strings.Replace(pod("redis@"+db), "kind: Pod", "kind: CronJob", 1)},
		{name: "unpinned", final: pod("reg.example/app:2.0"),
			err: "Pod p would still run reg.example/app:2.0 unpinned once digestpin's images entries are written, so digestpin writes none: AT"},
		{name: "another's digest", final: pod("reg.example/app:1.0@" + db),
			err: "Pod p would run reg.example/app:1.0@" + db + ", not the digest of reg.example/app:1.0, once digestpin's images entries are written, so digestpin writes none: AT"},
		{name: "a digest of an image not resolved", final: pod("reg.example/other:1.0@" + da),
			err: "Pod p would run reg.example/other:1.0@" + da + ", not the digest of reg.example/other:1.0"},
	} {
		err := Check([]byte(tc.final), resolved, "AT")
		if (err == nil) != (tc.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tc.err)) {
			t.Errorf("%s: error %v\nwant %s", tc.name, err, tc.err)
		}
	}
	got, err := Images([]byte(pod("a:1", "b:2", "a:1") + "---\napiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: [{name: c, image: c:3}]\n          ephemeralContainers: [{name: e, image: e:4}]\n          volumes: [{name: v, image: {reference: v:5}}]\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x}\nspec: {containers: [{image: crd:6}]}\n"))
	if want := []string{"quay.io/x@" + db, "a:1", "b:2", "c:3", "v:5"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Images = %q, %v; want %q", got, err, want)
	}
}
