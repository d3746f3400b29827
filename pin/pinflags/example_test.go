package pinflags_test

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/pin"
	"github.com/digestpin/digestpin/pin/pinflags"
)

// A program of its own that pins: its command line has a flag of its
// own (--out) beside digestpin's pinning flags, which AddFlags defines
// on the same flag set (with cobra, on cmd.Flags()). Once the flags are
// parsed, PinOptions turns them into pin.Options for pin.New, and
// LibraryError names the flags in pin.New's errors.
func Example() {
	f := &testregistry.Fatal{}
	defer f.Close()
	reg := testregistry.New(f)
	want := reg.PushImage(f, "web:1.4")
	manifest := []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: web\n    image: " + reg.Ref("web:1.4") + "\n")

	// newPinner builds a Pinner from a command line, as the program's
	// main would from os.Args[1:].
	newPinner := func(args ...string) (*pin.Pinner, error) {
		fs := pflag.NewFlagSet("myrender", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("out", "-", "write the manifests to `FILE`")
		var po pinflags.Options
		po.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		opts, err := po.PinOptions(nil, nil) // or the program's loggers
		if err != nil {
			return nil, err
		}
		p, err := pin.New(opts)
		if err != nil {
			return nil, po.LibraryError(err)
		}
		return p, nil
	}

	p, err := newPinner("--out", "pinned.yaml", "--mode", "digest")
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := p.Pin(context.Background(), manifest)
	if err != nil {
		fmt.Println(err)
		return
	}
	// The program writes res.Bytes() to --out, then calls
	// res.Commit() for the files of --write-lock and --report.
	defer res.Discard()
	fmt.Println("pinned by digest:", strings.Contains(string(res.Bytes()), reg.Ref("web")+"@"+want.String()))

	// A refused value, and an error of pin.New, name the flag.
	if _, err := newPinner("--mode", "sideways"); err != nil {
		fmt.Println(err)
	}
	if _, err := newPinner("--frozen"); err != nil {
		fmt.Println(err)
	}
	// Output:
	// pinned by digest: true
	// invalid argument "sideways" for "--mode" flag: want pin, digest or annotate
	// --frozen needs --lock FILE
}
