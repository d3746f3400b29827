package detgen

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/digestpin/digestpin/internal/testfiles"
)

func TestNewSeedRoundTrip(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// secretVolume lays out a Kubernetes Secret volume of files in a new folder,
// as the kubelet does, and returns the folder.
func secretVolume(t *testing.T, files map[string]string, mode os.FileMode) string {
	t.Helper()
	dir := t.TempDir()
	testfiles.SecretVolume(t, dir, files, mode)
	return dir
}

// TestReadSeedFileSecretVolume: a seed in a Kubernetes Secret volume is read
// through the kubelet's links with the modes defaultMode 0400 gives (0400;
// 0440 with an fsGroup), and after the Secret changed; group-readable is
// accepted in that layout only, and nothing more than group-readable.
func TestReadSeedFileSecretVolume(t *testing.T) {
	t.Parallel()
	good, _ := testSeed.MarshalText()
	for _, mode := range []os.FileMode{0o400, 0o440, 0o600, 0o640} {
		t.Run(fmt.Sprintf("mode %04o", mode), func(t *testing.T) {
			dir := secretVolume(t, map[string]string{"seed": string(good) + "\n", "other": "x"}, mode)
			if s, err := ReadSeedFile(filepath.Join(dir, "seed")); err != nil || s != testSeed {
				t.Errorf("ReadSeedFile in a Secret volume, mode %04o: %v, want the seed", mode, err)
			}
		})
	}

	t.Run("after the Secret changed", func(t *testing.T) {
		dir := secretVolume(t, map[string]string{"seed": string(good)}, 0o440)
		other, err := NewSeed()
		if err != nil {
			t.Fatal(err)
		}
		text, _ := other.MarshalText()
		testfiles.SecretVolume(t, dir, map[string]string{"seed": string(text)}, 0o440)
		if s, err := ReadSeedFile(filepath.Join(dir, "seed")); err != nil || s != other {
			t.Errorf("ReadSeedFile after the update: %v, want the new seed", err)
		}
	})

	t.Run("a swap between look and open", func(t *testing.T) {
		dir := secretVolume(t, map[string]string{"seed": string(good)}, 0o440)
		before, err := os.Stat(filepath.Join(dir, "seed"))
		if err != nil {
			t.Fatal(err)
		}
		testfiles.SecretVolume(t, dir, map[string]string{"seed": string(good)}, 0o440)
		if _, err := secretVolumeFile(filepath.Join(dir, "seed"), before); !errors.Is(err, errSeedChanged) {
			t.Errorf("secretVolumeFile with the file before the swap = %v, want errSeedChanged", err)
		}
	})

	// Layouts that are not the kubelet's, each with a group-readable seed:
	// refused as any group-readable file is.
	for _, tc := range []struct {
		desc  string
		build func(t *testing.T) string // returns the path to read
		want  string
	}{
		{
			desc: "more than group-readable in a Secret volume",
			build: func(t *testing.T) string {
				return filepath.Join(secretVolume(t, map[string]string{"seed": string(good)}, 0o444), "seed")
			},
			want: "defaultMode 0400",
		},
		{
			desc: "group-writable in a Secret volume",
			build: func(t *testing.T) string {
				return filepath.Join(secretVolume(t, map[string]string{"seed": string(good)}, 0o460), "seed")
			},
			want: "defaultMode 0400",
		},
		{
			desc: "the file in the hidden folder, named directly",
			build: func(t *testing.T) string {
				dir := secretVolume(t, map[string]string{"seed": string(good)}, 0o440)
				ts, _ := os.Readlink(filepath.Join(dir, "..data"))
				return filepath.Join(dir, ts, "seed")
			},
			want: "chmod 600",
		},
		{
			desc: "through ..data, named directly",
			build: func(t *testing.T) string {
				return filepath.Join(secretVolume(t, map[string]string{"seed": string(good)}, 0o440), "..data", "seed")
			},
			want: "chmod 600",
		},
		{
			desc: "a link of another name to the volume's file",
			build: func(t *testing.T) string {
				dir := secretVolume(t, map[string]string{"seed": string(good)}, 0o440)
				p := filepath.Join(dir, "alias")
				if err := os.Symlink(filepath.Join("..data", "seed"), p); err != nil {
					t.Fatal(err)
				}
				return p
			},
			want: "chmod 600",
		},
		{
			desc: "a link from elsewhere to the volume's visible name",
			build: func(t *testing.T) string {
				dir := secretVolume(t, map[string]string{"seed": string(good)}, 0o440)
				p := filepath.Join(t.TempDir(), "seed")
				if err := os.Symlink(filepath.Join(dir, "seed"), p); err != nil {
					t.Fatal(err)
				}
				return p
			},
			want: "chmod 600",
		},
		{
			desc: "..data to a folder outside the volume",
			build: func(t *testing.T) string {
				dir, outside := t.TempDir(), t.TempDir()
				mkSeed(t, filepath.Join(outside, "seed"), string(good), 0o440)
				mkLink(t, outside, filepath.Join(dir, "..data"))
				mkLink(t, filepath.Join("..data", "seed"), filepath.Join(dir, "seed"))
				return filepath.Join(dir, "seed")
			},
			want: "chmod 600",
		},
		{
			desc: "..data to a sibling that does not start with ..",
			build: func(t *testing.T) string {
				dir := t.TempDir()
				mkSeed(t, filepath.Join(dir, "files", "seed"), string(good), 0o440)
				mkLink(t, "files", filepath.Join(dir, "..data"))
				mkLink(t, filepath.Join("..data", "seed"), filepath.Join(dir, "seed"))
				return filepath.Join(dir, "seed")
			},
			want: "chmod 600",
		},
		{
			desc: "the hidden folder is a link",
			build: func(t *testing.T) string {
				dir, outside := t.TempDir(), t.TempDir()
				mkSeed(t, filepath.Join(outside, "seed"), string(good), 0o440)
				mkLink(t, outside, filepath.Join(dir, "..2026_07_01_12_00_00.1"))
				mkLink(t, "..2026_07_01_12_00_00.1", filepath.Join(dir, "..data"))
				mkLink(t, filepath.Join("..data", "seed"), filepath.Join(dir, "seed"))
				return filepath.Join(dir, "seed")
			},
			want: "chmod 600",
		},
		{
			desc: "the file in the hidden folder is a link",
			build: func(t *testing.T) string {
				dir, outside := t.TempDir(), t.TempDir()
				mkSeed(t, filepath.Join(outside, "seed"), string(good), 0o440)
				if err := os.Mkdir(filepath.Join(dir, "..2026_07_01_12_00_00.1"), 0o755); err != nil {
					t.Fatal(err)
				}
				mkLink(t, filepath.Join(outside, "seed"), filepath.Join(dir, "..2026_07_01_12_00_00.1", "seed"))
				mkLink(t, "..2026_07_01_12_00_00.1", filepath.Join(dir, "..data"))
				mkLink(t, filepath.Join("..data", "seed"), filepath.Join(dir, "seed"))
				return filepath.Join(dir, "seed")
			},
			want: "chmod 600",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := tc.build(t)
			_, err := ReadSeedFile(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("ReadSeedFile(%s) = %v, want an error naming it and containing %q", p, err, tc.want)
			}
		})
	}
}

// mkSeed writes a seed file with mode, creating its folder.
func mkSeed(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// mkLink makes the symbolic link link to target.
func mkLink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
