// Command benchredis measures what a shared resolution cache on Redis
// saves: N digestpin processes at once (as N Argo CD repo-server
// replicas), each rendering the same 40-image stream R times in a row,
// against a loopback registry with 50 ms latency; without a cache, with a
// cache folder per process (a replica's own disk), and with one Redis for
// all. It prints a Markdown table for the README.
//
// Usage: go run ./internal/cmd/benchredis [-renders 20] DIGESTPIN-BINARY
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testredis"
	"github.com/digestpin/digestpin/internal/testregistry"
)

func main() {
	renders := flag.Int("renders", 20, "renders by each process, one after the other")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: benchredis [-renders N] DIGESTPIN-BINARY")
		os.Exit(2)
	}
	if err := bench(flag.Arg(0), *renders); err != nil {
		fmt.Fprintf(os.Stderr, "benchredis: %v\n", err)
		os.Exit(1)
	}
}

// mode is one way to run the processes: the extra environment of process
// i.
type mode struct {
	name string
	env  func(i int) []string
}

func bench(bin string, renders int) error {
	return testregistry.Run(func(tb testregistry.TB) error { return benchWith(tb, bin, renders) })
}

func benchWith(tb testregistry.TB, bin string, renders int) error {
	reg := testregistry.New(tb)
	imgs := gen.Images(reg.Host(), 40)
	for _, img := range imgs {
		reg.PushImage(tb, strings.TrimPrefix(img, reg.Host()+"/")+":1.0")
	}
	var buf bytes.Buffer
	if err := gen.Stream(&buf, gen.Options{Deployments: 80, Images: imgs}); err != nil {
		return err
	}
	reg.SetLatency(50 * time.Millisecond)
	srv := testredis.Start(tb, testredis.Options{})
	rc := srv.Client(0)
	defer rc.Close()
	tmp, err := os.MkdirTemp("", "benchredis-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	modes := []mode{
		{name: "no cache", env: func(int) []string { return nil }},
		{name: "a cache folder per process", env: func(i int) []string {
			return []string{fmt.Sprintf("DIGESTPIN_CACHE_DIR=%s/p%d", tmp, i), "DIGESTPIN_CACHE_TTL=1h"}
		}},
		{name: "one Redis", env: func(int) []string {
			return []string{"DIGESTPIN_CACHE=" + srv.URL(0), "DIGESTPIN_CACHE_TTL=1h"}
		}},
	}
	fmt.Printf("| processes × renders | cache | manifest requests | all registry requests | wall | renders that went on without Redis |\n")
	fmt.Printf("|---|---|---|---|---|---|\n")
	for _, n := range []int{1, 4, 16} {
		for _, m := range modes {
			// Every measurement starts cold.
			if err := rc.FlushAll(context.Background()).Err(); err != nil {
				return err
			}
			if err := os.RemoveAll(tmp); err != nil {
				return err
			}
			reg.ResetCounts()
			start := time.Now()
			off, err := runAll(bin, buf.Bytes(), n, renders, m)
			if err != nil {
				return fmt.Errorf("%d processes, %s: %w", n, m.name, err)
			}
			wall := time.Since(start)
			fmt.Printf("| %d × %d | %s | %d | %d | %s | %d |\n", n, renders, m.name, reg.Manifests(), reg.Total(), wall.Round(10*time.Millisecond), off)
		}
	}
	return nil
}

// runAll runs n processes at once, each rendering in renders times in a
// row, and checks that each render pinned every image. It returns how many
// renders warned that they went on without Redis (a Redis call ran into
// its timeout on a loaded machine); any other message is an error.
func runAll(bin string, in []byte, n, renders int, m mode) (int, error) {
	errs := make([]error, n)
	offs := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// The developer's own DIGESTPIN_* settings stay out.
			var env []string
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "DIGESTPIN_") {
					env = append(env, kv)
				}
			}
			env = append(env, m.env(i)...)
			for range renders {
				cmd := exec.Command(bin)
				cmd.Env = env
				cmd.Stdin = bytes.NewReader(in)
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				if err := cmd.Run(); err != nil {
					errs[i] = fmt.Errorf("%w: %s", err, errb.String())
					return
				}
				if c := bytes.Count(out.Bytes(), []byte("@sha256:")); c != 160 {
					errs[i] = fmt.Errorf("%d images pinned, want 160", c)
					return
				}
				switch msg := errb.String(); {
				case msg == "":
				case strings.Count(msg, "\n") == 1 && strings.Contains(msg, "going on without Redis"):
					offs[i]++
				default:
					errs[i] = fmt.Errorf("unexpected messages: %s", msg)
					return
				}
			}
		})
	}
	wg.Wait()
	off := 0
	for i, err := range errs {
		if err != nil {
			return 0, err
		}
		off += offs[i]
	}
	return off, nil
}
