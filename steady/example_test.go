package steady_test

import (
	"fmt"

	"github.com/digestpin/digestpin/steady"
)

// Two renders of a chart that hashes a generated password into its pod
// template, and the output digestpin wrote last time.
func Example() {
	render := func(password, sum string) []byte {
		return []byte(`---
# Source: db/templates/secret.yaml
apiVersion: v1
kind: Secret
metadata:
  name: db
  namespace: data
data:
  password: ` + password + `
---
# Source: db/templates/statefulset.yaml
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
  namespace: data
spec:
  template:
    metadata:
      annotations:
        checksum/secret: ` + sum + `
    spec:
      containers:
        - name: db
          image: postgres:16@sha256:0f5a3b8fbd8c4b4a7b5e1e3d2b5e6d7c8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d
`)
	}
	v, err := steady.Diff(render("cjFyMnIz", "111"), render("czRzNXM2", "222"), steady.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, w := range v.Warnings() {
		fmt.Println(w)
	}

	previous := render("cDBwMXAy", "000")
	d, err := steady.Keep(previous, render("cjFyMnIz", "111"), v, steady.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("kept the previous output:", d.Kept)
	// Output:
	// Secret/data/db (db/templates/secret.yaml): data.password differs between two renders of the same input
	// StatefulSet/data/db (db/templates/statefulset.yaml): pod template annotation checksum/secret differs between two renders of the same input: this workload restarts on every render
	// kept the previous output: true
}
