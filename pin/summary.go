package pin

import (
	"fmt"
	"strings"

	"github.com/digestpin/digestpin/renderer"
)

// ShortDigest is a digest as prose shows it: its first 12 hex
// characters, as docker and Argo CD show image IDs.
func ShortDigest(d string) string {
	_, hex, ok := strings.Cut(d, ":")
	if !ok {
		hex = d
	}
	return hex[:min(12, len(hex))]
}

// Headline is the change set in one line: "2 images moved, 1 added, 4
// unchanged (against the lock file)".
func (cs *ChangeSet) Headline() string {
	var parts []string
	switch {
	case cs.Against == "":
		parts = append(parts, plural(len(cs.Added), "image pinned", "images pinned"))
	case len(cs.Moved) == 0:
		parts = append(parts, "no image moved")
	default:
		parts = append(parts, plural(len(cs.Moved), "image moved", "images moved"))
	}
	if cs.Against != "" {
		for _, p := range []struct {
			n    int
			what string
		}{{len(cs.Added), "added"}, {len(cs.Removed), "removed"}, {len(cs.Unchanged), "unchanged"}} {
			if p.n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
			}
		}
		parts = cs.rollsHeadline(parts)
	}
	if len(cs.Waiting) > 0 {
		parts = append(parts, fmt.Sprintf("%d waiting", len(cs.Waiting)))
	}
	if len(cs.Tags) > 0 {
		parts = append(parts, plural(len(cs.Tags), "left as a tag", "left as tags"))
	}
	return strings.Join(parts, ", ") + " (" + cs.against() + ")"
}

// against says what the change set compares with, in words.
func (cs *ChangeSet) against() string {
	switch cs.Against {
	case AgainstLock:
		return "against the lock file"
	case AgainstOutput:
		return "against the earlier output"
	case AgainstCache:
		return "against the cache"
	case AgainstFile:
		return "against the digests in the file"
	}
	return "nothing to compare with: no lock file, earlier output or cache"
}

// Text is the change set as plain text: the headline, then one line per
// image, "shop/web:dev a1b2c3d4e5f6 → 9f8e7d6c5b4a: Deployment/prod/web",
// with "(built 2026-12-01 14:03 UTC)" after the new digest when the
// registry said when it was built; fit for a commit message and a log.
func (cs *ChangeSet) Text() []byte {
	var b strings.Builder
	b.WriteString(cs.Headline() + "\n")
	line := func(ref, what string, wl []renderer.Workload) {
		b.WriteString(ref + " " + what)
		if objs := objects(wl); len(objs) > 0 {
			b.WriteString(": " + strings.Join(objs, ", "))
		}
		b.WriteByte('\n')
	}
	for _, c := range cs.Moved {
		line(c.Reference, c.Previous.short()+" → "+ShortDigest(c.Digest)+builtNote(c)+tagMove(c), c.Workloads)
	}
	for _, c := range cs.Added {
		line(c.Reference, "added "+ShortDigest(c.Digest)+builtNote(c)+chosen(c.Tag), c.Workloads)
	}
	for _, c := range cs.Removed {
		line(c.Reference, "removed "+c.Previous.short(), c.Workloads)
	}
	for _, c := range cs.Waiting {
		line(c.Reference, waitNote(c), c.Workloads)
	}
	for _, t := range cs.Tags {
		line(t.Reference, "left as a tag ("+t.Why+")", t.Workloads)
	}
	cs.rollsText(&b)
	return []byte(b.String())
}

// Markdown is the change set as Markdown: the headline, and a table of
// the images that moved, were added or removed, with the workloads that
// roll; then the images left as tags. It fits a pull request, a GitHub
// job summary and a GitLab merge request note.
func (cs *ChangeSet) Markdown() []byte {
	var b strings.Builder
	b.WriteString("### digestpin: " + cs.Headline() + "\n")
	if cs.Len() > 0 {
		b.WriteString("\n| Image | Before | After | Workloads that roll |\n| --- | --- | --- | --- |\n")
		row := func(ref, before, after string, wl []renderer.Workload) {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", code(ref), before, after, cell(strings.Join(containers(wl), "<br>")))
		}
		for _, c := range cs.Moved {
			row(c.Reference, code(c.Previous.short())+cell(tagOf(c.Previous.Tag, c.Tag)), code(ShortDigest(c.Digest))+cell(tagOf(c.Tag, c.Previous.Tag))+builtCell(c), c.Workloads)
		}
		for _, c := range cs.Added {
			row(c.Reference, "added", code(ShortDigest(c.Digest))+cell(chosen(c.Tag))+builtCell(c), c.Workloads)
		}
		for _, c := range cs.Removed {
			row(c.Reference, code(c.Previous.short()), "removed", c.Workloads)
		}
	}
	if len(cs.Waiting) > 0 {
		b.WriteString("\nWaiting: new digests held back by a waiting period (--min-age); the digest pinned before stays until then.\n\n| Image | Pinned | Waiting | Until | Workloads |\n| --- | --- | --- | --- | --- |\n")
		for _, c := range cs.Waiting {
			w := c.Waiting
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", code(c.Reference), code(ShortDigest(c.Digest))+cell(chosen(c.Tag)), code(ShortDigest(w.Digest))+cell(tagOf(w.Tag, c.Tag))+"<br>first seen "+w.Since.UTC().Format(builtLayout)+createdCell(w), w.Until.UTC().Format(builtLayout), cell(strings.Join(containers(c.Workloads), "<br>")))
		}
	}
	if len(cs.Tags) > 0 {
		b.WriteString("\nLeft as tags: nothing rolls when they move.\n\n")
		for _, t := range cs.Tags {
			fmt.Fprintf(&b, "- %s (%s): %s\n", code(t.Reference), t.Why, cell(strings.Join(containers(t.Workloads), ", ")))
		}
	}
	cs.rollsMarkdown(&b)
	return []byte(b.String())
}

// waitNote is what the text summary says of an image whose new digest
// waits: "keeps a1b2c3d4e5f6; 9f8e7d6c5b4a waits until 2026-12-05 14:03
// UTC (first seen 2026-12-04 14:03 UTC)".
func waitNote(c Change) string {
	w := c.Waiting
	seen := "first seen " + w.Since.UTC().Format(builtLayout)
	if w.Created != nil {
		seen = "built " + w.Created.UTC().Format(builtLayout) + ", " + seen
	}
	return "keeps " + ShortDigest(c.Digest) + chosen(c.Tag) + "; " + ShortDigest(w.Digest) + tagOf(w.Tag, c.Tag) + " waits until " + w.Until.UTC().Format(builtLayout) + " (" + seen + ")"
}

// createdCell is "<br>built …" when the period counts from the build
// time, or "".
func createdCell(w *Pending) string {
	if w.Created == nil {
		return ""
	}
	return "<br>built " + w.Created.UTC().Format(builtLayout)
}

// short is the previous digest, short.
func (p *Previous) short() string { return ShortDigest(p.Digest) }

// tagMove says which tag a policy chose before and now, when that
// changed: " (tag 1.4.1 → 1.4.2)".
func tagMove(c Change) string {
	if c.Tag == "" || c.Previous.Tag == "" || c.Tag == c.Previous.Tag {
		return chosen(c.Tag)
	}
	return " (tag " + c.Previous.Tag + " → " + c.Tag + ")"
}

// tagOf is " (tag T)" when a policy chose t and it differs from other.
func tagOf(t, other string) string {
	if t == "" || t == other {
		return ""
	}
	return " (tag " + t + ")"
}

// chosen is " (tag T)" for the tag a policy chose, if any.
func chosen(tag string) string {
	if tag == "" {
		return ""
	}
	return " (tag " + tag + ")"
}

// objects names the objects of wl once each, in order: "Deployment/prod/web".
func objects(wl []renderer.Workload) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range wl {
		if o := object(w); !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return out
}

// containers names the objects of wl once each, in order, with their
// containers: "Deployment/prod/web (migrate, web)".
func containers(wl []renderer.Workload) []string {
	var order []string
	of := map[string][]string{}
	for _, w := range wl {
		o := object(w)
		if _, ok := of[o]; !ok {
			order = append(order, o)
		}
		c := w.Container
		if w.Field != "" {
			c += " " + w.Field
		}
		of[o] = append(of[o], c)
	}
	out := make([]string, len(order))
	for i, o := range order {
		out[i] = o + " (" + strings.Join(of[o], ", ") + ")"
	}
	return out
}

// object is a workload's object: "Deployment/prod/web", or
// "ConfigMap/web" without a namespace.
func object(w renderer.Workload) string {
	if w.Namespace == "" {
		return w.Kind + "/" + w.Name
	}
	return w.Kind + "/" + w.Namespace + "/" + w.Name
}

// code is s as inline code in a table cell.
func code(s string) string { return "`" + strings.ReplaceAll(s, "`", "'") + "`" }

// cell escapes what would end a table cell or a line.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
