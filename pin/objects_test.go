package pin

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestImageOf checks which field paths of a Roll are image fields, and
// of which container: those the image lists name already.
func TestImageOf(t *testing.T) {
	for _, tc := range []struct {
		field, want string
		ok          bool
	}{
		{field: "spec.containers[web].image", want: "web", ok: true},
		{field: "spec.initContainers[migrate].image", want: "migrate", ok: true},
		{field: "spec.ephemeralContainers[debug].image", want: "debug", ok: true},
		{field: "containers[web].image", want: "web", ok: true},
		{field: "spec.volumes[data]", want: "volume/data", ok: true},
		{field: "spec.containers[web].env"},
		{field: "spec.containers[web]"},
		{field: "spec.sidecars[web].image"},
		{field: "metadata.annotations.x[web].image"},
		{field: "spec.extravolumes[data]"},
		{field: "].image"},
	} {
		if got, ok := imageOf(tc.field); got != tc.want || ok != tc.ok {
			t.Errorf("imageOf(%q) = %q, %v, want %q, %v", tc.field, got, ok, tc.want, tc.ok)
		}
	}
}

// TestRollsText checks the lines of the Rolls and the Secrets in the text
// summary: at most maxFields fields, added and removed workloads and
// Secrets, keys as the renderer quotes them.
func TestRollsText(t *testing.T) {
	cs := &ChangeSet{
		Against: AgainstOutput,
		Rolls: []Roll{
			{Kind: "Deployment", Namespace: "prod", Name: "web", Template: "spec.template", Change: "changed",
				Fields: []string{"metadata.annotations.checksum/config", "metadata.labels.v", "spec.containers[web].env", "spec.containers[web].args", "spec.volumes[a]", "spec.volumes[b]"}},
			{Kind: "CronJob", Name: "report", Template: "spec.jobTemplate.spec.template", Change: "added"},
		},
		Secrets: []SecretChange{
			{Namespace: "prod", Name: "tls", Change: "changed", Changed: []string{"tls.crt", "tls.key"}, Added: []string{`"odd key"`}, Removed: []string{"old"}},
			{Name: "gone", Change: "removed", Removed: []string{"token"}},
			{Name: "empty", Change: "added"},
		},
	}
	want := `no image moved, 1 workload rolls for another reason, 1 workload added, 3 Secrets changed (against the earlier output)
Deployment/prod/web rolls for another reason: metadata.annotations.checksum/config, metadata.labels.v, spec.containers[web].env, spec.containers[web].args and 2 more
CronJob/report added
Secret/prod/tls: tls.crt, tls.key changed; "odd key" added; old removed
Secret/gone removed: token
Secret/empty added
`
	if diff := cmp.Diff(want, string(cs.Text())); diff != "" {
		t.Errorf("Text() (-want +got):\n%s", diff)
	}
	md := string(cs.Markdown())
	for _, line := range []string{
		"| Deployment/prod/web | `metadata.annotations.checksum/config`, `metadata.labels.v`, `spec.containers[web].env`, `spec.containers[web].args` and 2 more |\n",
		"| CronJob/report | added |\n",
		"- Secret/prod/tls: `tls.crt`, `tls.key` changed; `\"odd key\"` added; `old` removed\n",
	} {
		if !strings.Contains(md, line) {
			t.Errorf("Markdown() lacks %q:\n%s", line, md)
		}
	}
}
