package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/pin"
)

// TestUnusedMirrorWarns checks that a --registry-mirror whose FROM no
// image is from (a typo) warns, naming the mirror, whether the render
// succeeds or fails; before, it was left out without a word, even with
// --mirror-only -v. A mirror that an image is from, however either spells
// the host, does not warn.
func TestUnusedMirrorWarns(t *testing.T) {
	reg, in := shop(t)
	mirror := testregistry.New(t)
	for _, img := range []string{"shop/migrate:1.4", "shop/web:1.4", "shop/proxy:2"} {
		mirror.PushImage(t, "cache/"+img)
	}
	mirror.PushIndex(t, "cache/shop/multi:1", "linux/amd64", "linux/arm64/v8")
	typo := "registry.exmple=" + mirror.Host() + "/cache"
	warning := "digestpin: warning: registry mirror " + typo + ": no image is from registry.exmple, so the mirror is never asked"
	for _, tc := range []struct {
		desc string
		in   string
		args []string
		fail bool
		warn bool
	}{
		{desc: "a typo", in: in, args: []string{"--registry-mirror", typo, "--mirror-only", "-v"}, warn: true},
		{desc: "a typo, and the render fails", in: strings.Replace(in, "shop/proxy:2", "shop/gone:1", 1), args: []string{"--registry-mirror", typo, "--mirror-only"}, fail: true, warn: true},
		{desc: "a mirror in use", in: in, args: []string{"--registry-mirror", reg.Host() + "=" + mirror.Host() + "/cache", "--mirror-only"}},
		{desc: "a mirror in use, its host in another case", in: strings.ReplaceAll(in, reg.Host()+"/shop/proxy", "localhost"+strings.TrimPrefix(reg.Host(), "127.0.0.1")+"/shop/proxy"), args: []string{"--registry-mirror", "LOCALHOST" + strings.TrimPrefix(reg.Host(), "127.0.0.1") + "=" + mirror.Host() + "/cache", "--mirror-only"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, stderr, err := runIn(t, tc.in, tc.args...)
			if (err != nil) != tc.fail {
				t.Fatalf("run() = %v, want failure %v; stderr:\n%s", err, tc.fail, stderr)
			}
			if got := strings.Contains(stderr, warning); got != tc.warn {
				t.Errorf("stderr:\n%s\nwarns about the mirror: %v, want %v", stderr, got, tc.warn)
			}
			if tc.warn && strings.Count(stderr, "registry mirror ") != 1 {
				t.Errorf("stderr:\n%s\nwant one warning about the mirror", stderr)
			}
		})
	}
}

// TestVerboseOncePerImage checks that -v logs each image once (the
// resolver logged it a second time), and says which mirror answered
// where it said "(registry)".
func TestVerboseOncePerImage(t *testing.T) {
	reg, in := shop(t)
	mirror := testregistry.New(t)
	mirror.PushImage(t, "cache/shop/web:1.4")
	report := filepath.Join(t.TempDir(), "report.json")
	_, stderr, err := runIn(t, in, "-v", "--registry-mirror", reg.Host()+"="+mirror.Host()+"/cache", "--report", report)
	if err != nil {
		t.Fatalf("run() = %v; stderr:\n%s", err, stderr)
	}
	// The report says so too.
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep pin.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	for _, im := range rep.Images {
		if want := map[bool]string{true: mirror.Host()}[im.Reference == reg.Ref("shop/web:1.4")]; im.Mirror != want || im.Source != "registry" {
			t.Errorf("report: %s has source %s, mirror %q; want registry, %q", im.Reference, im.Source, im.Mirror, want)
		}
	}
	for img, source := range map[string]string{
		"shop/web:1.4":     "(mirror " + mirror.Host() + ")",
		"shop/migrate:1.4": "(registry)",
		"shop/proxy:2":     "(registry)",
		"shop/multi:1":     "(registry)",
	} {
		var lines []string
		for _, l := range strings.Split(stderr, "\n") {
			if strings.Contains(l, reg.Ref(img)) {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.HasSuffix(lines[0], source) || !strings.HasPrefix(lines[0], "digestpin: "+reg.Ref(img)+": sha256:") {
			t.Errorf("-v logs %s in %q, want one line \"%s: sha256:… %s\"", img, lines, reg.Ref(img), source)
		}
	}
}
