package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/digestpin/digestpin/internal/gen"
)

// shapeNames joins the names of shapes with commas.
func shapeNames(shapes []gen.Shape) string {
	names := make([]string, len(shapes))
	for i, s := range shapes {
		names[i] = string(s)
	}
	return strings.Join(names, ",")
}

// shapeList parses a comma-separated list of shape names.
func shapeList(s string) ([]gen.Shape, error) {
	var out []gen.Shape
	if s == "" {
		return nil, nil
	}
	for f := range strings.SplitSeq(s, ",") {
		sh := gen.Shape(strings.TrimSpace(f))
		if !slices.Contains(gen.Shapes(), sh) {
			return nil, fmt.Errorf("%q: no shape %q; the shapes are %s", s, sh, shapeNames(gen.Shapes()))
		}
		out = append(out, sh)
	}
	return out, nil
}

// benchShapes measures the throughput of the binary on each shape of
// stream at each size, already pinned (no registry), as MB/s and as a
// ratio to the tools compared with; then, for the largest size, how the
// slowest shape compares with the fastest.
func benchShapes(c config) error {
	if len(c.shapes) == 0 || len(c.shapeSizes) == 0 {
		return nil
	}
	others, names := c.others()
	all := append([]tool{{bin: c.bin}}, others...)
	fmt.Printf("| shape | Deployments | input | wall | MB/s |%s", ratioHeads(names, "wall"))
	for _, n := range names {
		fmt.Printf(" %s MB/s | %s ÷ digestpin |", n, n)
	}
	fmt.Println()
	fmt.Println("|---|---|---|---|---|" + strings.Repeat("---|---|---|", len(names)))
	largest := slices.Max(c.shapeSizes)
	speeds := map[gen.Shape]float64{}
	for _, sh := range c.shapes {
		for _, n := range c.shapeSizes {
			var buf bytes.Buffer
			if err := gen.Stream(&buf, gen.Options{Deployments: n, Pinned: true, Shape: sh}); err != nil {
				return err
			}
			in := buf.Bytes()
			s, outs, err := medians(c.runs, all, in)
			if err != nil {
				return err
			}
			for i, name := range names {
				if name == "baseline" && !bytes.Equal(outs[i+1], outs[0]) {
					return fmt.Errorf("%s, %d Deployments: the baseline's output differs from digestpin's", sh, n)
				}
			}
			speed := mb(len(in)) / s[0].wall.Seconds()
			if n == largest {
				speeds[sh] = speed
			}
			fmt.Printf("| %s | %d | %.1f MB | %s | %.1f |%s", sh, n, mb(len(in)), round(s[0].wall), speed, wallRatios(s))
			for _, o := range s[1:] {
				fmt.Printf(" %.1f | ×%.1f |", mb(len(in))/o.wall.Seconds(), o.wall.Seconds()/s[0].wall.Seconds())
			}
			fmt.Println()
		}
	}
	// The goal is about every shape: the slowest against the fastest.
	slowest, fastest := c.shapes[0], c.shapes[0]
	for sh, v := range speeds {
		if v < speeds[slowest] {
			slowest = sh
		}
		if v > speeds[fastest] {
			fastest = sh
		}
	}
	fmt.Printf("\nAt %d Deployments: slowest %s %.1f MB/s, fastest %s %.1f MB/s (slowest ÷ fastest %.2f).\n\n",
		largest, slowest, speeds[slowest], fastest, speeds[fastest], speeds[slowest]/speeds[fastest])
	return nil
}
