// Command bench measures the digestpin binary as users run it: whole
// process, wall time and peak memory, on generated streams of growing size
// and against a loopback registry with injected latency. It prints
// Markdown tables for the README.
//
// With -baseline (a previous release's binary) and -kbld (Carvel kbld),
// each figure is also given as a ratio to theirs, measured in the same
// run, each binary's runs taken in turn: on a shared machine only ratios
// measured side by side mean anything.
//
// Usage: go run ./internal/cmd/bench [-runs 3] [-baseline BIN] [-kbld BIN] [-sizes 1000,…] [-shapes block,…] [-shape-sizes 1000,…] DIGESTPIN-BINARY
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// config is what the flags say.
type config struct {
	bin, baseline, kbld string
	runs                int
	sizes               []int
	images              []int
	shapes              []gen.Shape
	shapeSizes          []int
}

func main() {
	var c config
	flag.IntVar(&c.runs, "runs", 3, "runs of each measurement; the median is shown")
	flag.StringVar(&c.baseline, "baseline", os.Getenv("BASELINE"), "a previous digestpin binary to compare with (default $BASELINE)")
	flag.StringVar(&c.kbld, "kbld", os.Getenv("KBLD"), "a Carvel kbld binary to compare with (default $KBLD)")
	sizes := flag.String("sizes", "1000,5000,10000,20000,50000", "Deployments of the growth streams (\"\": none)")
	images := flag.String("images", "10,40,160", "distinct images of the registry streams (\"\": none)")
	shapes := flag.String("shapes", shapeNames(gen.Shapes()), "shapes of the shape streams (\"\": none)")
	shapeSizes := flag.String("shape-sizes", "1000,10000", "Deployments of the shape streams")
	shapesOnly := flag.Bool("shapes-only", false, "measure only the shape streams")
	verifyOnly := flag.Bool("verify-only", false, "measure only signature verification")
	skipVerify := flag.Bool("skip-verify", false, "skip signature verification")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: bench [-runs N] [-baseline BIN] [-kbld BIN] [-sizes N,…] [-images N,…] [-shapes S,…] [-shape-sizes N,…] [-shapes-only] DIGESTPIN-BINARY")
		os.Exit(2)
	}
	c.bin = flag.Arg(0)
	var err error
	if c.sizes, err = ints(*sizes); err == nil {
		c.images, err = ints(*images)
	}
	if err == nil {
		c.shapeSizes, err = ints(*shapeSizes)
	}
	if err == nil {
		c.shapes, err = shapeList(*shapes)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	// The binaries run as copies written alike: the peak memory counts
	// each binary's own pages, and how many of a file's pages Linux maps
	// depends on how the file was written (digestpin on empty input
	// peaked at 81 MB as the linker wrote it, 45 MB as cp(1) copied it),
	// which would weigh on one binary and not on the other.
	dir, err := os.MkdirTemp("", "bench-bin-")
	if err == nil {
		for i, p := range []*string{&c.bin, &c.baseline, &c.kbld} {
			if *p != "" && err == nil {
				*p, err = copyBinary(*p, fmt.Sprintf("%s/%d-%s", dir, i, filepath.Base(*p)))
			}
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
	err = testregistry.Run(func(tb testregistry.TB) error {
		if *verifyOnly {
			return benchVerify(tb, c.bin, c.runs)
		}
		if err := benchShapes(c); err != nil || *shapesOnly {
			return err
		}
		if err := benchWith(tb, c); err != nil {
			return err
		}
		if *skipVerify {
			return nil
		}
		return benchVerify(tb, c.bin, c.runs)
	})
	_ = os.RemoveAll(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// copyBinary copies the executable at from to to, and returns to.
func copyBinary(from, to string) (string, error) {
	b, err := os.ReadFile(from)
	if err != nil {
		return "", err
	}
	return to, os.WriteFile(to, b, 0o700)
}

// ints parses a comma-separated list of positive numbers.
func ints(s string) ([]int, error) {
	var out []int
	if s == "" {
		return nil, nil
	}
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive numbers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
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

// tool is a binary to measure, with its arguments.
type tool struct {
	bin  string
	args []string
}

// medians runs each tool n times on in, the tools in turn in each round
// (so that a load that comes and goes weighs on each alike), and returns
// each one's median wall time, largest peak memory and last output.
func medians(n int, tools []tool, in []byte) ([]sample, [][]byte, error) {
	walls := make([][]time.Duration, len(tools))
	ss := make([]sample, len(tools))
	outs := make([][]byte, len(tools))
	for range n {
		for i, t := range tools {
			r, o, err := run(t.bin, in, t.args...)
			if err != nil {
				return nil, nil, err
			}
			walls[i] = append(walls[i], r.wall)
			ss[i].maxRSS = max(ss[i].maxRSS, r.maxRSS)
			outs[i] = o
		}
	}
	for i := range tools {
		slices.Sort(walls[i])
		ss[i].wall = walls[i][len(walls[i])/2]
	}
	return ss, outs, nil
}

// others returns the tools to compare with, and the names of their
// columns: the baseline and kbld, those given. kbldArgs are kbld's
// arguments after "-f -".
func (c config) others(kbldArgs ...string) ([]tool, []string) {
	var ts []tool
	var names []string
	if c.baseline != "" {
		ts, names = append(ts, tool{bin: c.baseline}), append(names, "baseline")
	}
	if c.kbld != "" {
		ts, names = append(ts, tool{bin: c.kbld, args: append([]string{"-f", "-"}, kbldArgs...)}), append(names, "kbld")
	}
	return ts, names
}

// ratioHeads returns the table columns of the ratios to the tools
// compared with, for figure what.
func ratioHeads(names []string, what string) string {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, " %s ÷ %s |", what, n)
	}
	return b.String()
}

// ratios formats mine as a ratio to each of theirs: "×0.42".
func ratios(mine float64, theirs ...float64) string {
	var b strings.Builder
	for _, t := range theirs {
		fmt.Fprintf(&b, " ×%.2f |", mine/t)
	}
	return b.String()
}

func benchWith(tb testregistry.TB, c config) error {
	others, names := c.others()
	all := append([]tool{{bin: c.bin}}, others...)
	// The memory of a run that reads nothing: the binary's own pages
	// and its packages' initialisation, which no input changes.
	digestpins := []tool{{bin: c.bin}}
	if c.baseline != "" {
		digestpins = append(digestpins, tool{bin: c.baseline})
	}
	idle, _, err := medians(c.runs, digestpins, nil)
	if err != nil {
		return err
	}
	fmt.Printf("Peak memory of a run on empty input (the binary itself): %d MB", idle[0].maxRSS>>20)
	if c.baseline != "" {
		fmt.Printf(", baseline %d MB", idle[1].maxRSS>>20)
	}
	fmt.Println(".")
	fmt.Println()

	// Growth with the stream: already-pinned Deployments (two containers
	// each) plus a Service and a ConfigMap per three Deployments; and the
	// same streams as digestpin's own output (nothing to change).
	fmt.Printf("| Deployments (documents) | input | pinned input: wall |%s MB/s | peak memory | above empty input |%s digestpin's own output: wall |%s peak memory |\n",
		ratioHeads(names, "wall"), ratioHeads(names, "peak"), ratioHeads(names, "wall"))
	fmt.Println("|---|---|---|" + strings.Repeat("---|", len(names)) + "---|---|---|" + strings.Repeat("---|", len(names)) + "---|" + strings.Repeat("---|", len(names)) + "---|")
	for _, n := range c.sizes {
		var buf bytes.Buffer
		if err := gen.Stream(&buf, gen.Options{Deployments: n, Pinned: true}); err != nil {
			return err
		}
		in := buf.Bytes()
		s, outs, err := medians(c.runs, all, in)
		if err != nil {
			return err
		}
		for i, name := range names {
			if name == "baseline" && !bytes.Equal(outs[i+1], outs[0]) {
				return fmt.Errorf("%d Deployments: the baseline's output differs from digestpin's", n)
			}
		}
		f, _, err := medians(c.runs, all, outs[0])
		if err != nil {
			return err
		}
		docs := n + 2*((n+2)/3)
		fmt.Printf("| %d (%d) | %.1f MB | %s |%s %.1f | %d MB | %d MB |%s %s |%s %d MB |\n",
			n, docs, mb(len(in)), round(s[0].wall), wallRatios(s), mb(len(in))/s[0].wall.Seconds(),
			s[0].maxRSS>>20, (s[0].maxRSS-idle[0].maxRSS)>>20, rssRatios(s), round(f[0].wall), wallRatios(f), f[0].maxRSS>>20)
	}
	fmt.Println()

	// Registry round trips: N distinct images at 50 ms latency, 400
	// Deployments, default concurrency.
	others, names = c.others("--registry-insecure")
	fmt.Printf("| distinct images (400 Deployments) | latency | wall |%s manifest requests | all requests | per image |\n", ratioHeads(names, "wall"))
	fmt.Println("|---|---|---|" + strings.Repeat("---|", len(names)) + "---|---|---|")
	for _, n := range c.images {
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
		// Each round runs digestpin, whose requests are counted, then
		// the others.
		walls := make([][]time.Duration, 1+len(others))
		var manifests, total int
		for range c.runs {
			reg.ResetCounts()
			s, out, err := run(c.bin, buf.Bytes())
			if err != nil {
				return err
			}
			if c := bytes.Count(out, []byte("@sha256:")); c != 800 {
				return fmt.Errorf("%d images pinned, want 800", c)
			}
			walls[0] = append(walls[0], s.wall)
			manifests, total = reg.Manifests(), reg.Total()
			for i, t := range others {
				s, _, err := run(t.bin, buf.Bytes(), t.args...)
				if err != nil {
					return err
				}
				walls[i+1] = append(walls[i+1], s.wall)
			}
		}
		med := make([]sample, len(walls))
		for i, w := range walls {
			slices.Sort(w)
			med[i].wall = w[len(w)/2]
		}
		fmt.Printf("| %d | 50 ms | %s |%s %d | %d | %.2f |\n", n, round(med[0].wall), wallRatios(med), manifests, total, float64(total)/float64(n))
	}
	fmt.Println()
	if len(c.images) == 0 {
		return nil
	}
	return benchWarm(tb, c)
}

// benchWarm measures the auth cache: 40 distinct images at 50 ms (the
// token server's too), 400 Deployments, with a cache folder, cold (an
// empty folder) and warm (the folder the cold run left, its resolutions
// past --cache-ttl, so that every image is asked again, with the
// registry's ping answer and tokens kept); with no auth, and with bearer
// tokens (anonymous, as Docker Hub's and GHCR's public images are).
func benchWarm(tb testregistry.TB, c config) error {
	const n = 40
	fmt.Printf("| %d images, 50 ms, --cache-dir | auth | wall | pings | token requests | manifest requests | all requests |\n", n)
	fmt.Println("|---|---|---|---|---|---|---|")
	var goal []string
	for _, bearer := range []bool{false, true} {
		reg := testregistry.New(tb)
		imgs := gen.Images(reg.Host(), n)
		for _, img := range imgs {
			reg.PushImage(tb, img[len(reg.Host())+1:]+":1.0")
		}
		var buf bytes.Buffer
		if err := gen.Stream(&buf, gen.Options{Deployments: 400, Images: imgs}); err != nil {
			return err
		}
		auth := "none"
		var ts *testregistry.TokenServer
		if bearer {
			auth = "bearer"
			ts = testregistry.NewTokenServer(tb, "", "")
			ts.SetLatency(50 * time.Millisecond)
			reg.Handle(ts.Guard())
		}
		reg.SetLatency(50 * time.Millisecond)
		type figures struct {
			walls                           []time.Duration
			pings, tokens, manifests, total int
		}
		var cold, warm figures
		for range c.runs {
			dir, err := os.MkdirTemp("", "bench-cache-")
			if err != nil {
				return err
			}
			args := []string{"--cache-dir", dir, "--cache-ttl", "1ms"}
			for _, f := range []*figures{&cold, &warm} {
				reg.ResetCounts()
				tokens := 0
				if ts != nil {
					tokens = ts.Exchanges()
				}
				s, out, err := run(c.bin, buf.Bytes(), args...)
				if err != nil {
					_ = os.RemoveAll(dir)
					return err
				}
				if k := bytes.Count(out, []byte("@sha256:")); k != 800 {
					_ = os.RemoveAll(dir)
					return fmt.Errorf("%d images pinned, want 800", k)
				}
				f.walls = append(f.walls, s.wall)
				f.pings, f.manifests, f.total = reg.Count("GET ping"), reg.Manifests(), reg.Total()
				if ts != nil {
					f.tokens = ts.Exchanges() - tokens
				}
				f.total += f.tokens
				// The resolutions written are past the TTL for
				// the warm run.
				time.Sleep(2 * time.Millisecond)
			}
			_ = os.RemoveAll(dir)
		}
		for _, r := range []struct {
			name string
			f    *figures
		}{{"cold", &cold}, {"warm", &warm}} {
			slices.Sort(r.f.walls)
			med := r.f.walls[len(r.f.walls)/2]
			fmt.Printf("| %s | %s | %s | %d | %d | %d | %d |\n", r.name, auth, round(med), r.f.pings, r.f.tokens, r.f.manifests, r.f.total)
			if !bearer {
				bound := map[string]time.Duration{"cold": 150 * time.Millisecond, "warm": 100 * time.Millisecond}[r.name]
				met := "met"
				if med > bound {
					met = "not met"
				}
				goal = append(goal, fmt.Sprintf("%s ≤ %s: %s (%s)", r.name, round(bound), met, round(med)))
			}
		}
	}
	fmt.Println()
	fmt.Printf("Goal of issue 36 (%d images at 50 ms, no auth): %s.\n\n", n, strings.Join(goal, ", "))
	return nil
}

// wallRatios formats the wall time of the first sample as a ratio to
// each of the others'.
func wallRatios(s []sample) string {
	theirs := make([]float64, 0, len(s)-1)
	for _, o := range s[1:] {
		theirs = append(theirs, o.wall.Seconds())
	}
	return ratios(s[0].wall.Seconds(), theirs...)
}

// rssRatios formats the peak memory of the first sample as a ratio to
// each of the others'.
func rssRatios(s []sample) string {
	theirs := make([]float64, 0, len(s)-1)
	for _, o := range s[1:] {
		theirs = append(theirs, float64(o.maxRSS))
	}
	return ratios(float64(s[0].maxRSS), theirs...)
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
