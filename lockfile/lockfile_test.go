package lockfile

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const (
	d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	d3 = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
)

// entries are the golden file's entries, deliberately out of order and in
// short spellings.
var entries = []Entry{
	{Reference: "registry.example:5000/team/app:1.4", Digest: d2},
	{Reference: "nginx:1.27", Digest: d1},
	{Reference: "registry.example:5000/team/app:1.4", Platform: "linux/arm64/v8", Digest: d3},
	{Reference: "docker.io/library/nginx:1.27", Digest: d1}, // the same entry again
}

func TestMarshalGolden(t *testing.T) {
	checkGolden(t, entries, "example.lock")
}

// checkGolden checks that entries marshal to testdata/golden, in any
// order, and parse back to the same lock.
func checkGolden(t *testing.T, entries []Entry, golden string) {
	t.Helper()
	l, err := New(entries)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	got, err := l.Marshal()
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	golden = filepath.Join("testdata", golden)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("Marshal() mismatch (-want +got):\n%s", diff)
	}

	// The same entries in any order give the same bytes, and the bytes
	// parse back to the same lock.
	rev := append([]Entry(nil), entries...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	l2, err := New(rev)
	if err != nil {
		t.Fatalf("New(reversed): %v", err)
	}
	if got2, _ := l2.Marshal(); string(got2) != string(got) {
		t.Errorf("Marshal depends on entry order:\n%s\nvs\n%s", got2, got)
	}
	back, err := Parse(got)
	if err != nil {
		t.Fatalf("Parse(Marshal()): %v", err)
	}
	if diff := cmp.Diff(l.Entries(), back.Entries()); diff != "" {
		t.Errorf("Parse(Marshal()) mismatch (-want +got):\n%s", diff)
	}
}

func TestMarshalEmpty(t *testing.T) {
	var l Lock
	b, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(%q): %v", b, err)
	}
	if back.Len() != 0 {
		t.Errorf("Parse(%q).Len() = %d, want 0", b, back.Len())
	}
}

func TestLookup(t *testing.T) {
	l, err := New(entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref, platform string
		want          string // "" for a miss
	}{
		{ref: "nginx:1.27", want: d1},
		{ref: "docker.io/nginx:1.27", want: d1},
		{ref: "index.docker.io/library/nginx:1.27", want: d1},
		{ref: "nginx:1.27", platform: "linux/amd64"},
		{ref: "nginx:1.28"},
		{ref: "nginx"},
		{ref: "registry.example:5000/team/app:1.4", want: d2},
		{ref: "registry.example:5000/team/app:1.4", platform: "linux/arm64/v8", want: d3},
		{ref: "registry.example:5000/team/app:1.4", platform: "linux/arm64"},
	} {
		ref, err := name.ParseReference(tc.ref)
		if err != nil {
			t.Fatal(err)
		}
		h, ok := l.Lookup(ref, tc.platform)
		got := ""
		if ok {
			got = h.String()
		}
		if got != tc.want {
			t.Errorf("Lookup(%s, %q) = %q, want %q", tc.ref, tc.platform, got, tc.want)
		}
	}
	var nilLock *Lock
	if _, ok := nilLock.Lookup(name.MustParseReference("nginx"), ""); ok {
		t.Error("nil Lock: Lookup found an entry")
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		desc, in, want string
	}{
		{desc: "empty", in: "", want: "lock file is empty"},
		{desc: "only a comment", in: "# nothing\n", want: "lock file is empty"},
		{desc: "not YAML", in: "version: [1\n", want: "malformed lock file"},
		{desc: "no version", in: "images: []\n", want: "unsupported lock file version 0, want 1, 2, 3, 4 or 5"},
		{desc: "future version", in: "version: 6\nimages: []\n", want: "unsupported lock file version 6"},
		{desc: "pending in version 4", in: "version: 4\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  pending:\n    digest: " + d2 + "\n    since: 2026-12-01T10:00:00Z\n", want: "entry 1: nginx:1 has a pending digest, which needs lock file version 5"},
		{desc: "pending without since", in: "version: 5\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  pending:\n    digest: " + d2 + "\n", want: "nginx:1: the pending digest " + d2 + " has no since"},
		{desc: "pending is the locked digest", in: "version: 5\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  pending:\n    digest: " + d1 + "\n    since: 2026-12-01T10:00:00Z\n", want: "nginx:1: the pending digest is the locked one"},
		{desc: "pending bad digest", in: "version: 5\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  pending:\n    digest: sha256:ab\n    since: 2026-12-01T10:00:00Z\n", want: `parsing pending digest "sha256:ab" of nginx:1`},
		{desc: "pending tag without policy", in: "version: 5\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  pending:\n    digest: " + d2 + "\n    tag: \"2\"\n    since: 2026-12-01T10:00:00Z\n", want: "nginx:1: a pending digest has a tag exactly when the entry has a policy"},
		{desc: "pending without the policy's tag", in: "version: 5\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  policy: latest\n  tag: \"1\"\n  pending:\n    digest: " + d2 + "\n    since: 2026-12-01T10:00:00Z\n", want: "a pending digest has a tag exactly when"},
		{desc: "pending unknown field", in: "version: 5\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  pending:\n    digest: " + d2 + "\n    until: 2026-12-01T10:00:00Z\n", want: "malformed lock file: line 7"},
		{desc: "pending conflict", in: "version: 5\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  pending:\n    digest: " + d2 + "\n    since: 2026-12-01T10:00:00Z\n- reference: nginx:1\n  digest: " + d1 + "\n", want: "entry 2: index.docker.io/library/nginx:1 is locked twice"},
		{desc: "media type in version 3", in: "version: 3\nimages:\n  - reference: r.example/a:1\n    digest: sha256:" + strings.Repeat("a", 64) + "\n    mediaType: application/vnd.oci.image.index.v1+json\n", want: "entry 1: r.example/a:1 has a media type, which needs lock file version 4"},
		{desc: "a media type of no manifest", in: "version: 4\nimages:\n  - reference: r.example/a:1\n    digest: sha256:" + strings.Repeat("a", 64) + "\n    mediaType: text/html\n", want: `r.example/a:1: media type "text/html" is no image manifest or index`},
		{desc: "unknown field", in: "version: 1\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  label: x\n", want: "malformed lock file: line 5: not a digestpin lock file"},
		{desc: "policy in version 1", in: "version: 1\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  policy: latest\n  tag: x\n", want: "entry 1: nginx:1 has a tag policy, which needs lock file version 2"},
		{desc: "policy without tag", in: "version: 2\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  policy: latest\n", want: "entry 1: nginx:1 has a policy without a tag"},
		{desc: "tag without policy", in: "version: 2\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  tag: x\n", want: "entry 1: nginx:1 has a policy without a tag"},
		{desc: "bad tag", in: "version: 2\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  policy: latest\n  tag: a/b\n", want: `entry 1: parsing tag "a/b" of nginx:1`},
		// Tags go-containerregistry takes, but the kubelet refuses.
		{desc: "a tag that starts with -", in: "version: 2\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  policy: latest\n  tag: -bad\n", want: `entry 1: parsing tag "-bad" of nginx:1`},
		{desc: "a tag that starts with .", in: "version: 2\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  policy: latest\n  tag: .x\n", want: `entry 1: parsing tag ".x" of nginx:1`},
		// References the kubelet refuses are never locked.
		{desc: "a reference the kubelet refuses", in: "version: 2\nimages:\n- reference: a..b:1\n  digest: " + d1 + "\n", want: `entry 1: parsing reference "a..b:1"`},
		{desc: "policy conflict", in: "version: 2\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n  policy: latest\n  tag: \"2\"\n- reference: nginx:1\n  digest: " + d1 + "\n  policy: latest\n  tag: \"3\"\n", want: "entry 2: index.docker.io/library/nginx:1 with policy latest is locked twice, to 2@" + d1 + " and 3@" + d1},
		{desc: "bad reference", in: "version: 1\nimages:\n- reference: Nginx:1\n  digest: " + d1 + "\n", want: `entry 1: parsing reference "Nginx:1"`},
		{desc: "digest reference", in: "version: 1\nimages:\n- reference: nginx@" + d1 + "\n  digest: " + d1 + "\n", want: "already carries a digest"},
		{desc: "bad digest", in: "version: 1\nimages:\n- reference: nginx:1\n  digest: sha256:abc\n", want: `parsing digest "sha256:abc" of nginx:1`},
		{desc: "bad platform", in: "version: 1\nimages:\n- reference: nginx:1\n  platform: /\n  digest: " + d1 + "\n", want: `parsing platform "/" of nginx:1`},
		{desc: "conflict", in: "version: 1\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n- reference: docker.io/nginx:1\n  digest: " + d2 + "\n", want: "entry 2: index.docker.io/library/nginx:1 is locked twice"},
		// Two lock files run together: the second one's digests were
		// ignored.
		{desc: "a second document", in: "version: 1\nimages:\n- reference: nginx:1\n  digest: " + d1 + "\n---\nversion: 1\nimages:\n- reference: redis:7\n  digest: " + d2 + "\n", want: "malformed lock file: line 5: a second YAML document; a lock file is one"},
		{desc: "an empty second document", in: "version: 1\nimages: []\n---\n", want: "malformed lock file: line 3: a second YAML document"},
		{desc: "a broken second document", in: "version: 1\nimages: []\n---\n[\n", want: "malformed lock file: line 4: a second YAML document, and not one a lock file could be"},
		{desc: "every bad entry", in: "version: 1\nimages:\n- reference: A:1\n  digest: " + d1 + "\n- reference: B:1\n  digest: " + d1 + "\n", want: "entry 1: parsing reference \"A:1\": could not parse reference: A:1\nentry 2: parsing reference \"B:1\""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%q) = %v, want an error containing %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestReadMissing(t *testing.T) {
	_, err := Read(filepath.Join(t.TempDir(), "none.lock"))
	if err == nil || !strings.Contains(err.Error(), "reading lock file") || !strings.Contains(err.Error(), "none.lock") {
		t.Errorf("Read(missing) = %v, want an error naming the file", err)
	}
}

func TestWriteFileConcurrent(t *testing.T) {
	// Writers racing on one path leave one complete file and no temporary
	// files behind.
	dir := t.TempDir()
	path := filepath.Join(dir, "digests.lock")
	locks := make([]*Lock, 8)
	for i := range locks {
		l, err := New(entries[:1+i%3])
		if err != nil {
			t.Fatal(err)
		}
		locks[i] = l
	}
	var wg sync.WaitGroup
	for _, l := range locks {
		wg.Go(func() {
			if err := l.WriteFile(path); err != nil {
				t.Errorf("WriteFile: %v", err)
			}
		})
	}
	wg.Wait()
	l, err := Read(path)
	if err != nil {
		t.Fatalf("Read after concurrent writes: %v", err)
	}
	if n := l.Len(); n < 1 || n > 3 {
		t.Errorf("Len() = %d, want one writer's 1 to 3 entries", n)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != 1 {
		t.Errorf("dir holds %d files, want only digests.lock", len(des))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("Stat(%s) = %v, %v, want mode 0644", path, fi, err)
	}
}

func TestWriteFileNoDir(t *testing.T) {
	var l Lock
	path := filepath.Join(t.TempDir(), "missing", "digests.lock")
	err := l.WriteFile(path)
	if err == nil || !strings.HasPrefix(err.Error(), "writing lock file "+path+": ") || strings.Contains(err.Error(), ".tmp") {
		t.Errorf("WriteFile(missing dir) = %v, want a writing error that names %s and no temporary file", err, path)
	}
}

// TestReadNeverQuotesContent checks that a file that is not a lock file,
// reached through a lock file path, is refused without a word of its
// content, and that a FIFO is refused rather than waited on.
func TestReadNeverQuotesContent(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.lock")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc, content, want string
	}{
		{desc: "passwd", content: "root:x:0:0:SECRET-root:/root:/bin/bash\n", want: "malformed lock file: line 1: not a digestpin lock file"},
		{desc: "key file", content: "aws_secret_access_key: SECRET-abc\ntoken: SECRET-def\n", want: "malformed lock file: line 1: not a digestpin lock file"},
		{desc: "broken YAML", content: "version: 1\nimages: [SECRET-x\n", want: "malformed lock file: line "},
		{desc: "a second document", content: "version: 1\nimages: []\n---\ntoken: SECRET-x\n", want: "second document: malformed lock file: line 3: a second YAML document"},
		{desc: "a broken second document", content: "version: 1\nimages: []\n---\nimages: [SECRET-x\n", want: "second document: malformed lock file: line 3: a second YAML document, and not"},
		{desc: "FIFO", want: "not a regular file"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			path := fifo
			if tc.content != "" {
				path = filepath.Join(dir, tc.desc)
				if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Read(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SECRET") {
				t.Errorf("Read() = %v, want an error with %q and nothing of the content", err, tc.want)
			}
		})
	}
}

// FuzzParseOneDocument checks that Parse never panics, and that a lock
// file it takes stops being one with any second document after it: two
// lock files run together are refused, never read as the first.
func FuzzParseOneDocument(f *testing.F) {
	f.Add("version: 1\nimages:\n- reference: nginx:1\n  digest: "+d1+"\n", "version: 1\nimages:\n- reference: redis:7\n  digest: "+d2+"\n")
	f.Add("version: 1\nimages: []\n", "")
	f.Add("---\nversion: 2\nimages: []\n...\n", "[")
	f.Add("# digestpin lock file\nversion: 1\nimages: []\n", "# only a comment\n")
	f.Fuzz(func(t *testing.T, first, second string) {
		if _, err := Parse([]byte(first)); err != nil {
			return
		}
		both := first + "\n---\n" + second
		if _, err := Parse([]byte(both)); err == nil {
			t.Fatalf("Parse(%q) took two documents", both)
		}
	})
}

// TestPendingGolden: a pending digest makes the file version 5, keeps
// its since to the second in UTC, and reads back through Pending.
func TestPendingGolden(t *testing.T) {
	since := time.Date(2026, 12, 1, 11, 0, 0, 500, time.FixedZone("CET", 3600))
	pending := []Entry{
		{Reference: "nginx:1.27", Digest: d1, MediaType: "application/vnd.oci.image.index.v1+json", Pending: &Pending{Digest: d2, MediaType: "application/vnd.oci.image.index.v1+json", Since: since}},
		{Reference: "registry.example/app:1.4", Digest: d3, Policy: "semver:~1.4", Tag: "1.4.2", Pending: &Pending{Digest: d1, Tag: "1.4.3", Since: since}},
		{Reference: "registry.example/db:2", Digest: d3},
	}
	checkGolden(t, pending, "pending.lock")
	l, err := New(pending)
	if err != nil {
		t.Fatal(err)
	}
	want := &Pending{Digest: d2, MediaType: "application/vnd.oci.image.index.v1+json", Since: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	if diff := cmp.Diff(want, l.Pending(name.MustParseReference("docker.io/library/nginx:1.27"), "", "")); diff != "" {
		t.Errorf("Pending (-want +got):\n%s", diff)
	}
	if p := l.Pending(name.MustParseReference("registry.example/db:2"), "", ""); p != nil {
		t.Errorf("Pending of an entry without one = %+v", p)
	}
	if p := l.Pending(name.MustParseReference("registry.example/app:1.4"), "", "semver:~1.4"); p == nil || p.Tag != "1.4.3" {
		t.Errorf("Pending of the policy's entry = %+v, want tag 1.4.3", p)
	}
	// Once nothing waits, the file is version 4 again.
	l, err = New([]Entry{{Reference: "nginx:1.27", Digest: d2, MediaType: "application/vnd.oci.image.index.v1+json"}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := l.Marshal(); !strings.Contains(string(b), "version: 4\n") {
		t.Errorf("Marshal without pending = %s, want version 4", b)
	}
}

func TestVerifiedRoundTrip(t *testing.T) {
	v := &Verification{Policy: "key:sha256:ab", Signers: []Signer{{Term: "key:sha256:ab", Identity: "key sha256:ab", Bundle: "sha256:" + strings.Repeat("c", 64)}}}
	l, err := New([]Entry{{Reference: "ghcr.io/acme/app:1", Digest: "sha256:" + strings.Repeat("d", 64), Verified: v}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "version: 3\n") {
		t.Errorf("Marshal = %s, want version 3", b)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(Marshal) = %v", err)
	}
	ref, _ := name.ParseReference("ghcr.io/acme/app:1")
	got, h, ok := back.LookupVerified(ref, "", "")
	if !ok || h.Hex != strings.Repeat("d", 64) {
		t.Fatalf("LookupVerified = %v, %v, %v", got, h, ok)
	}
	if diff := cmp.Diff(v, got); diff != "" {
		t.Errorf("LookupVerified (-want +got):\n%s", diff)
	}
	// A verification in a file of an older version is refused: that
	// digestpin would have ignored it.
	old := strings.Replace(string(b), "version: 3", "version: 1", 1)
	if _, err := Parse([]byte(old)); err == nil || !strings.Contains(err.Error(), "needs lock file version 3") {
		t.Errorf("Parse(version 1 with verified) = %v, want an error", err)
	}
}
