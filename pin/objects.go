package pin

import (
	"fmt"
	"slices"
	"strings"

	"github.com/digestpin/digestpin/internal/textlist"
	"github.com/digestpin/digestpin/renderer"
)

// Roll is a workload whose pod template differs from a previous output's
// for another reason than its images' digests (ChangeSet.Rolls).
type Roll = renderer.TemplateChange

// SecretChange is a Secret whose keys differ from a previous output's,
// named by key, never by value (ChangeSet.Secrets).
type SecretChange = renderer.SecretChange

// compareObjects adds to cs the pod templates and the Secrets of out that
// differ from those of prev, a previous output; a lock file has none.
// A template whose only differences are image fields of containers that
// cs names already (an image moved to the tag a policy chose, a tag
// edited: moved, added or removed) is in the image lists, not in Rolls.
func (p *Pinner) compareObjects(cs *ChangeSet, prev *previous, out renderer.Result) error {
	if prev == nil || prev.snap == nil {
		return nil
	}
	now, err := p.o.Renderer.Snapshot(out.Bytes())
	if err != nil {
		return fmt.Errorf("comparing with earlier output %s: %w", p.o.DiffAgainst, err)
	}
	templates, secrets := renderer.Compare(prev.snap, now)
	covered := map[renderer.Workload]bool{}
	for _, list := range [][]Change{cs.Moved, cs.Added, cs.Removed} {
		for _, c := range list {
			for _, w := range c.Workloads {
				if w.Field == "" {
					covered[renderer.Workload{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, Container: w.Container}] = true
				}
			}
		}
	}
	for _, t := range templates {
		t.Fields = slices.DeleteFunc(t.Fields, func(f string) bool {
			c, ok := imageOf(f)
			return ok && covered[renderer.Workload{Kind: t.Kind, Namespace: t.Namespace, Name: t.Name, Container: c}]
		})
		if t.Change == renderer.ChangeChanged && len(t.Fields) == 0 {
			continue
		}
		cs.Rolls = append(cs.Rolls, t)
	}
	cs.Secrets = secrets
	return nil
}

// imageOf returns the container (renderer.Workload.Container) whose image
// field a Roll's field path is: "spec.containers[web].image" is web's,
// "spec.volumes[data]" the image volume data's.
func imageOf(field string) (string, bool) {
	if rest, ok := strings.CutSuffix(field, "].image"); ok {
		i := strings.LastIndex(rest, "[")
		list := rest[:max(i, 0)]
		list = list[strings.LastIndex(list, ".")+1:]
		if i >= 0 && (list == "containers" || list == "initContainers" || list == "ephemeralContainers") {
			return rest[i+1:], true
		}
		return "", false
	}
	if rest, ok := strings.CutSuffix(field, "]"); ok {
		if i := strings.LastIndex(rest, "volumes["); i >= 0 && (i == 0 || rest[i-1] == '.') {
			return renderer.VolumePrefix + rest[i+len("volumes["):], true
		}
	}
	return "", false
}

// maxFields is how many changed fields of a Roll the summaries show.
const maxFields = 4

// rollsHeadline adds to the headline's parts the workloads that roll for
// another reason, those added and removed, and the Secrets that changed.
func (cs *ChangeSet) rollsHeadline(parts []string) []string {
	count := map[string]int{}
	for _, r := range cs.Rolls {
		count[r.Change]++
	}
	for _, c := range []struct {
		n         int
		one, many string
	}{
		{count[renderer.ChangeChanged], "1 workload rolls for another reason", "%d workloads roll for another reason"},
		{count[renderer.ChangeAdded], "1 workload added", "%d workloads added"},
		{count[renderer.ChangeRemoved], "1 workload removed", "%d workloads removed"},
		{len(cs.Secrets), "1 Secret changed", "%d Secrets changed"},
	} {
		switch {
		case c.n == 1:
			parts = append(parts, c.one)
		case c.n > 1:
			parts = append(parts, fmt.Sprintf(c.many, c.n))
		}
	}
	return parts
}

// why says why a Roll rolls: its first fields, "added" or "removed".
func why(r Roll, quote func(string) string) string {
	if r.Change != renderer.ChangeChanged {
		return r.Change
	}
	return textlist.Some(quoted(r.Fields, quote), maxFields)
}

// secretKeys says which keys of a Secret changed, by name: "tls.crt,
// tls.key changed; ca.crt added".
func secretKeys(s SecretChange, quote func(string) string) string {
	var parts []string
	for _, k := range []struct {
		keys []string
		what string
	}{{s.Changed, "changed"}, {s.Added, "added"}, {s.Removed, "removed"}} {
		if len(k.keys) == 0 {
			continue
		}
		parts = append(parts, strings.Join(quoted(k.keys, quote), ", ")+" "+k.what)
	}
	return strings.Join(parts, "; ")
}

// secretLine is a Secret's line: "Secret/prod/web-tls: tls.crt, tls.key
// changed", "Secret/prod/db added: password".
func secretLine(s SecretChange, quote func(string) string) string {
	line := rollObject("Secret", s.Namespace, s.Name)
	if s.Change != renderer.ChangeChanged {
		line += " " + s.Change
	}
	keys := secretKeys(s, quote)
	if s.Change != renderer.ChangeChanged {
		keys = strings.Join(slices.Concat(quoted(s.Added, quote), quoted(s.Removed, quote)), ", ")
	}
	if keys == "" {
		return line
	}
	return line + ": " + keys
}

// quoted is each of keys through quote.
func quoted(keys []string, quote func(string) string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = quote(k)
	}
	return out
}

// rollObject names a Roll's object: "Deployment/prod/web".
func rollObject(kind, namespace, name string) string {
	return object(renderer.Workload{Kind: kind, Namespace: namespace, Name: name})
}

// rollsText writes the text lines of the Rolls and the Secrets:
// "Deployment/prod/web rolls for another reason: spec.containers[web].env",
// "Secret/prod/web-tls: tls.crt, tls.key changed".
func (cs *ChangeSet) rollsText(b *strings.Builder) {
	same := func(s string) string { return s }
	for _, r := range cs.Rolls {
		o := rollObject(r.Kind, r.Namespace, r.Name)
		if r.Change != renderer.ChangeChanged {
			b.WriteString(o + " " + r.Change + "\n")
			continue
		}
		b.WriteString(o + " rolls for another reason: " + why(r, same) + "\n")
	}
	for _, s := range cs.Secrets {
		b.WriteString(secretLine(s, same) + "\n")
	}
}

// rollsMarkdown writes the Rolls as a table and the Secrets as a list.
func (cs *ChangeSet) rollsMarkdown(b *strings.Builder) {
	if len(cs.Rolls) > 0 {
		b.WriteString("\nWorkloads that roll for another reason than an image:\n\n| Workload | Why |\n| --- | --- |\n")
		for _, r := range cs.Rolls {
			fmt.Fprintf(b, "| %s | %s |\n", cell(rollObject(r.Kind, r.Namespace, r.Name)), cell(why(r, code)))
		}
	}
	if len(cs.Secrets) > 0 {
		b.WriteString("\nSecrets that change, by key (values are never shown):\n\n")
		for _, s := range cs.Secrets {
			b.WriteString("- " + cell(secretLine(s, code)) + "\n")
		}
	}
}
