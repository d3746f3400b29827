package detgen

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestNewSeedRoundTrip(t *testing.T) {
	a, err := NewSeed()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSeed()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || a == (Seed{}) {
		t.Fatalf("NewSeed gave equal or zero seeds")
	}
	text, err := a.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(text), "digestpin-seed-v1:") || bytes.ContainsAny(text, "\n\r") {
		t.Errorf("MarshalText() = %q, want one line digestpin-seed-v1:…", text)
	}
	p := filepath.Join(t.TempDir(), "seed")
	if err := os.WriteFile(p, append(text, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSeedFile(p)
	if err != nil {
		t.Fatalf("ReadSeedFile: %v", err)
	}
	if got != a {
		t.Error("ReadSeedFile(MarshalText(seed)) is another seed")
	}
	// Without the line end as well.
	if err := os.WriteFile(p, text, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadSeedFile(p); err != nil || got != a {
		t.Errorf("ReadSeedFile without line end = %v, %v", got == a, err)
	}
}

// TestReadSeedFileErrors: each bad seed file is a one-line error naming the
// path, never showing what the file holds.
func TestReadSeedFileErrors(t *testing.T) {
	good, _ := testSeed.MarshalText()
	secretish := "digestpin-seed-v1:" + base64.StdEncoding.EncodeToString([]byte("SECRETSECRETSECRETSECRET"))
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(name, target string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	subdir := filepath.Join(dir, "adir")
	if err := os.Mkdir(subdir, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		desc string
		path string
		want string // in the error
	}{
		{"missing", filepath.Join(dir, "nope"), "does not exist"},
		{"empty", write("empty", "", 0o600), "is empty"},
		{"blank", write("blank", "\n", 0o600), "is empty"},
		{"too short", write("short", "digestpin-seed-v1:"+base64.StdEncoding.EncodeToString([]byte("short")), 0o600), "has 5 bytes, want 32"},
		{"too long", write("long", secretish+"QUFBQUFBQUFBQUFBQUFB", 0o600), "longer than 32 bytes"},
		{"not base64", write("garbled", "digestpin-seed-v1:!!!!SECRET!!!!", 0o600), "not valid base64"},
		{"no prefix", write("noprefix", base64.StdEncoding.EncodeToString(testSeed[:]), 0o600), "not a digestpin seed"},
		{"two lines", write("twolines", string(good)+"\n"+string(good)+"\n", 0o600), "more than one line"},
		{"all zero", write("zero", "digestpin-seed-v1:"+base64.StdEncoding.EncodeToString(make([]byte, 32)), 0o600), "all zero"},
		{"directory", subdir, "is a directory"},
		{"fifo", fifo, "not a regular file"},
		{"world-readable", write("world", string(good), 0o644), "chmod 600 " + filepath.Join(dir, "world")},
		{"group-readable", write("group", string(good), 0o640), "chmod 600"},
		{"over 4 KiB", write("big", strings.Repeat("A", 5000), 0o600), "larger than 4 KiB"},
		{"symlink to missing", link("dangling", filepath.Join(dir, "gone")), "symbolic link to a missing file"},
		{"symlink to directory", link("todir", subdir), "is a directory"},
		{"symlink to world-readable", link("toworld", filepath.Join(dir, "world")), "chmod 600"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := ReadSeedFile(tc.path)
			if err == nil {
				t.Fatalf("ReadSeedFile(%s) = nil error, want one containing %q", tc.path, tc.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, tc.path) || strings.Contains(msg, "\n") {
				t.Errorf("ReadSeedFile(%s) = %q, want one line naming the path and containing %q", tc.path, msg, tc.want)
			}
			for _, leak := range []string{"SECRET", "U0VDUkVU", base64.StdEncoding.EncodeToString(testSeed[:])} {
				if strings.Contains(msg, leak) {
					t.Errorf("ReadSeedFile(%s) = %q shows the file's content", tc.path, msg)
				}
			}
		})
	}

	// A good file behind a symbolic link (a Kubernetes Secret volume) is
	// read.
	p := link("goodlink", write("good", string(good), 0o600))
	if s, err := ReadSeedFile(p); err != nil || s != testSeed {
		t.Errorf("ReadSeedFile(link to good) = %v, want the seed", err)
	}
}

// TestSeedNeverPrinted: fmt shows a placeholder for a seed, whatever the
// verb.
func TestSeedNeverPrinted(t *testing.T) {
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q", "%b", "%o", "%T %v"} {
		got := fmt.Sprintf(verb, testSeed)
		if strings.Contains(got, hex.EncodeToString(testSeed[:4])) || strings.Contains(got, "1 2 3 4") ||
			strings.Contains(got, "0x1") || strings.Contains(got, "AQIDBA") || strings.Contains(got, "\x01\x02") {
			t.Errorf("Sprintf(%q, seed) = %q shows the seed", verb, got)
		}
	}
	if got := fmt.Sprint(struct{ S Seed }{testSeed}); strings.Contains(got, "1 2 3") {
		t.Errorf("Sprint(struct with seed) = %q shows the seed", got)
	}
}
