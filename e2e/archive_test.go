//go:build unix

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// tarEntry is one entry of an archive a test writes: a header and, for a
// regular file, its content.
type tarEntry struct {
	hdr  tar.Header
	body string
}

// file, link, hardLink, fifo and dir are the entries of hostile archives.
func fileEntry(name, body string) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Mode: 0o755, Typeflag: tar.TypeReg, Size: int64(len(body))}, body: body}
}
func linkEntry(name, target string) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: target}}
}
func hardLinkEntry(name, target string) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Mode: 0o755, Typeflag: tar.TypeLink, Linkname: target}}
}
func fifoEntry(name string) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Mode: 0o755, Typeflag: tar.TypeFifo}}
}
func dirEntry(name string) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Mode: 0o755, Typeflag: tar.TypeDir}}
}

// writeArchive writes the gzipped tar of entries, in order, to path and
// returns its SHA-256.
func writeArchive(t *testing.T, path string, entries ...tarEntry) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		if err := tw.WriteHeader(&e.hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

// newVictim writes the file at path that a hostile archive's link points
// at: private (0600), and a program that leaves a mark when it runs. It
// returns the mark's path.
func newVictim(t *testing.T, path string) (mark string) {
	t.Helper()
	mark = filepath.Join(t.TempDir(), "ran")
	if err := os.WriteFile(path, []byte("#!/bin/sh\ntouch "+mark+"\necho digestpin 0.1.0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return mark
}

// checkVictim checks that the victim is as it was and never ran.
func checkVictim(t *testing.T, path, mark string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the file the archive links to has mode %o now, want 0600", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(path); !strings.HasPrefix(string(b), "#!/bin/sh\ntouch ") {
		t.Errorf("the file the archive links to holds %q now", b)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("the file the archive links to was run")
	}
}

// hostileEntries are the ways a release archive's digestpin can be
// something other than a regular file. want is in the one error line.
func hostileEntries(t *testing.T, name, victimPath string) []struct {
	desc    string
	entries []tarEntry
	want    string
} {
	return []struct {
		desc    string
		entries []tarEntry
		want    string
	}{
		{desc: "a link to a private file", entries: []tarEntry{linkEntry(name, victimPath)}, want: name + " in "},
		{desc: "a link to a program", entries: []tarEntry{linkEntry(name, "/bin/true")}, want: name + " in "},
		{desc: "a hard link", entries: []tarEntry{fileEntry("LICENSE", "Apache-2.0\n"), hardLinkEntry(name, "LICENSE")}, want: name},
		{desc: "a FIFO", entries: []tarEntry{fifoEntry(name)}, want: name + " in "},
		{desc: "a folder", entries: []tarEntry{dirEntry(name + "/"), fileEntry(name+"/x", "x\n")}, want: name + " in "},
	}
}

// TestInstallHookRefusesHostileArchive runs the plugins' install hook on
// release archives whose digestpin or digestpin-helm is not a regular
// file. A link was installed, its target made 0755 and run; now each is
// refused in one line and nothing is installed.
func TestInstallHookRefusesHostileArchive(t *testing.T) {
	t.Parallel()
	for _, who := range []string{"digestpin", "digestpin-helm"} {
		t.Run(who, func(t *testing.T) { testInstallHookRefusesHostileArchive(t, who) })
	}
}

// testInstallHookRefusesHostileArchive is TestInstallHookRefusesHostileArchive
// with who (digestpin or digestpin-helm) the hostile entry.
func testInstallHookRefusesHostileArchive(t *testing.T, who string) {
	hook := filepath.Join(repoRoot(t), "scripts", "install-binary.sh")
	archive := "digestpin_0.1.0_" + runtime.GOOS + "_" + runtime.GOARCH + ".tar.gz"
	// Each case links to the same path; the file there is made anew for
	// each.
	victimPath, mark := filepath.Join(t.TempDir(), "victim"), ""
	good := fileEntry(who, "#!/bin/sh\necho digestpin 0.1.0\n")
	other := fileEntry(map[string]string{"digestpin": "digestpin-helm", "digestpin-helm": "digestpin"}[who], "#!/bin/sh\necho digestpin 0.1.0\n")
	cases := hostileEntries(t, who, victimPath)
	cases = append(cases,
		struct {
			desc    string
			entries []tarEntry
			want    string
		}{desc: "a link, then a file of that name", entries: []tarEntry{linkEntry(who, victimPath), good}, want: "either"},
		struct {
			desc    string
			entries []tarEntry
			want    string
		}{desc: "a regular file", entries: []tarEntry{good}},
	)
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			mark = newVictim(t, victimPath)
			rel := t.TempDir()
			sum := writeArchive(t, filepath.Join(rel, archive), append(tc.entries, other)...)
			if err := os.WriteFile(filepath.Join(rel, "SHA256SUMS"), []byte(sum+"  "+archive+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(http.FileServer(http.Dir(rel)))
			defer srv.Close()
			plugin := t.TempDir()
			if err := os.WriteFile(filepath.Join(plugin, "plugin.yaml"), []byte("name: digestpin\nversion: \"0.1.0\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := runCmd(t, plugin, nil, []string{"HELM_PLUGIN_DIR=" + plugin, "DIGESTPIN_PLUGIN_URL=" + srv.URL, "HELM_PLUGIN_NAME="}, "sh", hook, "install")
			checkVictim(t, victimPath, mark)
			bin := filepath.Join(plugin, "bin", "digestpin")
			fi, err := os.Lstat(bin)
			if tc.want == "either" {
				// GNU tar makes the link last (the file was only its
				// placeholder), another tar may keep the file: refused,
				// or a regular file installed.
				if r.err != nil {
					tc.want = who + " in "
				} else {
					tc.want = ""
				}
			}
			if tc.want == "" {
				// Installed, and a regular file of its own.
				if r.err != nil || err != nil || !fi.Mode().IsRegular() {
					t.Errorf("install = %v (%v, %v), want a regular bin/digestpin:\n%s%s", r.err, err, fi, r.stdout, r.stderr)
				}
				return
			}
			if err == nil {
				t.Errorf("bin/digestpin is installed (%s), want nothing", fi.Mode())
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.err == nil || len(lines) != 1 || !strings.HasPrefix(lines[0], "digestpin plugin: error: ") || !strings.Contains(lines[0], tc.want) {
				t.Errorf("install = %v, stderr %q; want one error line with %q", r.err, r.stderr, tc.want)
			}
		})
	}
}

// TestArgoCDImageFetchRefusesHostileArchive runs image-fetch.sh on
// archives whose binary is not a regular file: `install` copied a link's
// target (a private file of the build) into the image as an executable;
// now each is refused and nothing is put in place.
func TestArgoCDImageFetchRefusesHostileArchive(t *testing.T) {
	t.Parallel()
	fetch := filepath.Join(repoRoot(t), "scripts", "argocd", "image-fetch.sh")
	victimPath, mark := filepath.Join(t.TempDir(), "victim"), ""
	tool := func(name string) string { return "#!/bin/sh\necho " + name + "\n" }
	for _, who := range []string{"digestpin", "helm", "kustomize"} {
		for _, tc := range hostileEntries(t, map[string]string{"digestpin": "digestpin", "helm": "linux-amd64/helm", "kustomize": "kustomize"}[who], victimPath) {
			t.Run(who+" "+tc.desc, func(t *testing.T) {
				mark = newVictim(t, victimPath)
				dir := t.TempDir()
				entries := map[string][]tarEntry{
					"digestpin": {fileEntry("digestpin", tool("digestpin")), fileEntry("digestpin-helm", tool("digestpin-helm"))},
					"helm":      {fileEntry("linux-amd64/helm", tool("helm"))},
					"kustomize": {fileEntry("kustomize", tool("kustomize"))},
				}
				if who == "helm" {
					tc.entries = append([]tarEntry{dirEntry("linux-amd64/")}, tc.entries...)
				}
				if who == "digestpin" {
					tc.entries = append(tc.entries, fileEntry("digestpin-helm", tool("digestpin-helm")))
				}
				entries[who] = tc.entries
				dpSum := writeArchive(t, filepath.Join(dir, "digestpin_0.1.0_linux_amd64.tar.gz"), entries["digestpin"]...)
				helmSum := writeArchive(t, filepath.Join(dir, "helm-v4.3.1-linux-amd64.tar.gz"), entries["helm"]...)
				kzSum := writeArchive(t, filepath.Join(dir, "kustomize_v5.8.1_linux_amd64.tar.gz"), entries["kustomize"]...)
				if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(dpSum+"  digestpin_0.1.0_linux_amd64.tar.gz\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
				defer srv.Close()
				env := []string{
					"DIGESTPIN_VERSION=0.1.0", "DIGESTPIN_RELEASE_URL=" + srv.URL,
					"HELM_VERSION=v4.3.1", "HELM_SHA256=" + helmSum, "HELM_URL=" + srv.URL,
					"KUSTOMIZE_VERSION=v5.8.1", "KUSTOMIZE_SHA256=" + kzSum, "KUSTOMIZE_URL=" + srv.URL,
					"TARGETARCH=amd64",
				}
				bin := filepath.Join(t.TempDir(), "bin")
				r := runCmd(t, t.TempDir(), nil, env, fetch, bin)
				checkVictim(t, victimPath, mark)
				if r.err == nil || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "digestpin-cmp image: ") {
					t.Errorf("image-fetch.sh = %v, stderr %q; want one error line", r.err, r.stderr)
				}
				if _, err := os.Lstat(bin); err == nil {
					t.Errorf("a failed fetch left %s", bin)
				}
			})
		}
	}
}
