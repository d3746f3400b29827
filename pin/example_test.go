package pin_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/pin"
)

// The lock workflow as an embedder runs it: a first Pin asks the registry
// and writes the lock file, which Commit puts in place once the output is
// safe; a later Pin with Frozen takes every digest from that lock file and
// asks no registry, even one that serves another image under the tag by
// then.
func Example() {
	f := &testregistry.Fatal{}
	defer f.Close()
	reg := testregistry.New(f)
	want := reg.PushImage(f, "web:1.4")
	dir, err := os.MkdirTemp("", "digestpin-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	lock := filepath.Join(dir, "digestpin.lock")
	manifest := []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: web
        image: ` + reg.Ref("web:1.4") + "\n")

	p, err := pin.New(pin.Options{WriteLock: lock})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := p.Pin(context.Background(), manifest)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Write res.Bytes() where it goes, then commit the lock file.
	if err := res.Commit(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("pinned:", strings.Contains(string(res.Bytes()), "@"+want.String()))

	reg.PushImage(f, "web:1.4") // the tag moves
	requests := reg.Total()
	frozen, err := pin.New(pin.Options{Lock: lock, Frozen: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	again, err := frozen.Pin(context.Background(), manifest)
	if err != nil {
		fmt.Println(err)
		return
	}
	again.Discard()
	fmt.Println("same output:", string(again.Bytes()) == string(res.Bytes()))
	fmt.Println("registry requests:", reg.Total()-requests)
	for _, img := range again.Images {
		fmt.Println("source:", img.Source)
	}
	// Output:
	// pinned: true
	// same output: true
	// registry requests: 0
	// source: lock
}
