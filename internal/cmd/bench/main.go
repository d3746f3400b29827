// Command bench measures the digestpin binary as users run it: whole
// process, wall time and peak memory, on generated streams of growing size
// and against a loopback registry with injected latency. It prints
// Markdown tables for the README.
//
// Usage: go run ./internal/cmd/bench [-runs 3] DIGESTPIN-BINARY
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/internal/testsign"
	"github.com/digestpin/digestpin/verify"
)

func main() {
	runs := flag.Int("runs", 3, "runs of each measurement; the median is shown")
	verifyOnly := flag.Bool("verify-only", false, "measure only signature verification")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: bench [-runs N] DIGESTPIN-BINARY")
		os.Exit(2)
	}
	f := bench
	if *verifyOnly {
		f = func(bin string, runs int) error {
			return testregistry.Run(func(tb testregistry.TB) error { return benchVerify(tb, bin, runs) })
		}
	}
	if err := f(flag.Arg(0), *runs); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// sample is one run of the binary.
type sample struct {
	wall   time.Duration
	maxRSS int64 // bytes
}

// run runs the binary on in and measures it. The peak memory is what
// time(1) reports for its child: Go starts a child with vfork, and Linux
// keeps the high-water mark of this process's memory (the inputs it
// holds) across the child's exec, so the child's own rusage would report
// at least this process's size; time forks the binary from its own small
// process instead.
func run(bin string, in []byte, args ...string) (sample, []byte, error) {
	rss, err := os.CreateTemp("", "bench-rss-")
	if err != nil {
		return sample{}, nil, err
	}
	rss.Close()
	defer os.Remove(rss.Name())
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", rss.Name(), bin}, args...)...)
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return sample{}, nil, fmt.Errorf("%s: %w: %s", bin, err, errb.String())
	}
	b, err := os.ReadFile(rss.Name())
	if err != nil {
		return sample{}, nil, fmt.Errorf("reading what time(1) measured: %w", err)
	}
	kib, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return sample{}, nil, fmt.Errorf("time(1) measured %q: %w", b, err)
	}
	return sample{wall: wall, maxRSS: kib << 10}, out.Bytes(), nil
}

// median runs the binary n times and returns the median wall time and
// the largest peak memory.
func median(n int, bin string, in []byte, args ...string) (sample, []byte, error) {
	var walls []time.Duration
	var s sample
	var out []byte
	for range n {
		r, o, err := run(bin, in, args...)
		if err != nil {
			return sample{}, nil, err
		}
		walls = append(walls, r.wall)
		s.maxRSS = max(s.maxRSS, r.maxRSS)
		out = o
	}
	slices.Sort(walls)
	s.wall = walls[len(walls)/2]
	return s, out, nil
}

func bench(bin string, runs int) error {
	return testregistry.Run(func(tb testregistry.TB) error { return benchWith(tb, bin, runs) })
}

func benchWith(tb testregistry.TB, bin string, runs int) error {
	// Growth with the stream: already-pinned Deployments (two containers
	// each) plus a Service and a ConfigMap per three Deployments; and the
	// same streams as digestpin's own output (nothing to change).
	fmt.Println("| Deployments (documents) | input | pinned input: wall | MB/s | peak memory | digestpin's own output: wall | peak memory |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, n := range []int{1000, 5000, 10000, 20000} {
		var buf bytes.Buffer
		if err := gen.Stream(&buf, gen.Options{Deployments: n, Pinned: true}); err != nil {
			return err
		}
		in := buf.Bytes()
		s, out, err := median(runs, bin, in)
		if err != nil {
			return err
		}
		f, _, err := median(runs, bin, out)
		if err != nil {
			return err
		}
		docs := n + 2*((n+2)/3)
		fmt.Printf("| %d (%d) | %.1f MB | %s | %.1f | %d MB | %s | %d MB |\n",
			n, docs, mb(len(in)), round(s.wall), mb(len(in))/s.wall.Seconds(), s.maxRSS>>20, round(f.wall), f.maxRSS>>20)
	}
	fmt.Println()

	// Registry round trips: N distinct images at 50 ms latency, 400
	// Deployments, default concurrency.
	fmt.Println("| distinct images (400 Deployments) | latency | wall | manifest requests | all requests | per image |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, n := range []int{10, 40, 160} {
		reg := testregistry.New(tb)
		imgs := gen.Images(reg.Host(), n)
		for _, img := range imgs {
			reg.PushImage(tb, img[len(reg.Host())+1:]+":1.0")
		}
		var buf bytes.Buffer
		if err := gen.Stream(&buf, gen.Options{Deployments: 400, Images: imgs}); err != nil {
			return err
		}
		reg.SetLatency(50 * time.Millisecond)
		var walls []time.Duration
		var manifests, total int
		for range runs {
			reg.ResetCounts()
			s, out, err := run(bin, buf.Bytes())
			if err != nil {
				return err
			}
			if c := bytes.Count(out, []byte("@sha256:")); c != 800 {
				return fmt.Errorf("%d images pinned, want 800", c)
			}
			walls = append(walls, s.wall)
			manifests, total = reg.Manifests(), reg.Total()
		}
		slices.Sort(walls)
		fmt.Printf("| %d | 50 ms | %s | %d | %d | %.2f |\n", n, round(walls[len(walls)/2]), manifests, total, float64(total)/float64(n))
	}
	fmt.Println()
	return benchVerify(tb, bin, runs)
}

// benchVerify measures signature verification: 40 distinct images, each
// signed with a key (a Sigstore bundle among its referrers), 400
// Deployments, 50 ms latency; without --verify, with it, with it and a
// warm cache, with a lock file that records the verifications (--lock),
// and frozen.
func benchVerify(tb testregistry.TB, bin string, runs int) error {
	const n = 40
	reg := testregistry.New(tb)
	imgs := gen.Images(reg.Host(), n)
	kp, keyFile := testsign.NewKey(tb, protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256)
	for _, img := range imgs {
		d := testsign.PushImage(tb, reg, img[len(reg.Host())+1:], "1.0")
		testsign.Attach(tb, d, testsign.KeyBundle(tb, kp, testsign.Statement(tb, d, verify.CosignSignPredicate)))
	}
	var buf bytes.Buffer
	if err := gen.Stream(&buf, gen.Options{Deployments: 400, Images: imgs}); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench")
	if err != nil {
		return err
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	lock := dir + "/digests.lock"
	policy := []string{"--verify", reg.Host() + "/**=key:" + keyFile}
	cached := append(slices.Clone(policy), "--cache-dir", dir+"/cache", "--cache-ttl", "1h")
	// The lock file with every verification, and a warm cache, written
	// once without latency.
	if _, _, err := run(bin, buf.Bytes(), append(policy, "--write-lock", lock)...); err != nil {
		return err
	}
	if _, _, err := run(bin, buf.Bytes(), cached...); err != nil {
		return err
	}
	reg.SetLatency(50 * time.Millisecond)
	fmt.Printf("| %d signed images (400 Deployments), 50 ms | wall | referrers requests | manifest requests | blob requests | all requests |\n", n)
	fmt.Println("|---|---|---|---|---|---|")
	for _, c := range []struct {
		desc string
		args []string
	}{
		{"no --verify", nil},
		{"--verify key:FILE", policy},
		{"--verify key:FILE --cache-dir (warm)", cached},
		{"--verify key:FILE --lock (verifications recorded)", append(policy, "--lock", lock)},
		{"--verify key:FILE --lock --frozen", append(policy, "--lock", lock, "--frozen")},
	} {
		var walls []time.Duration
		var referrers, manifests, blobs, total int
		for range runs {
			reg.ResetCounts()
			s, out, err := run(bin, buf.Bytes(), c.args...)
			if err != nil {
				return err
			}
			if k := bytes.Count(out, []byte("@sha256:")); k != 800 {
				return fmt.Errorf("%s: %d images pinned, want 800", c.desc, k)
			}
			walls = append(walls, s.wall)
			referrers, manifests, blobs, total = reg.Count("GET referrers"), reg.Manifests(), reg.Count("GET blobs"), reg.Total()
		}
		slices.Sort(walls)
		fmt.Printf("| %s | %s | %d | %d | %d | %d |\n", c.desc, round(walls[len(walls)/2]), referrers, manifests, blobs, total)
	}
	return nil
}

func mb(n int) float64 { return float64(n) / (1 << 20) }

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
