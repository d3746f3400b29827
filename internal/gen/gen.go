// Package gen generates Helm-like manifest streams of any size for
// benchmarks: Deployments with two containers each, and Services and
// ConfigMaps (documents without images) in between, in the shapes that
// charts write (block style, flow collections, long ConfigMaps, comments,
// CRLF line breaks), and a corpus of real charts' output.
package gen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
)

// Options shape a generated stream.
type Options struct {
	// Deployments is the number of Deployments; the stream also holds one
	// Service and one ConfigMap for every three Deployments.
	Deployments int
	// Images are the distinct image references (without tag) the
	// containers use, round robin; empty means 40 on registry.example.
	Images []string
	// Pinned writes every image with a digest already.
	Pinned bool
	// Shape is the form the documents are written in; "" is Block.
	Shape Shape
}

// Images returns n distinct image names on registry host.
func Images(host string, n int) []string {
	imgs := make([]string, n)
	for i := range imgs {
		imgs[i] = fmt.Sprintf("%s/team%d/service%d", host, i%7, i)
	}
	return imgs
}

// Digest returns the fake digest Stream pins image to.
func Digest(image string) string {
	sum := sha256.Sum256([]byte(image))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Stream writes the stream to w.
func Stream(w io.Writer, o Options) error {
	imgs := o.Images
	if len(imgs) == 0 {
		imgs = Images("registry.example", 40)
	}
	ref := func(i int) string {
		r := imgs[i%len(imgs)] + ":1.0"
		if o.Pinned {
			r += "@" + Digest(r)
		}
		return r
	}
	sh, ok := shapes[o.Shape]
	switch {
	case o.Shape == Charts:
		return charts(w, o.Deployments, o.Pinned)
	case !ok:
		return fmt.Errorf("generating a stream: unknown shape %q", o.Shape)
	case o.Shape == CRLF:
		w = crlfWriter{w}
	}
	for i := range o.Deployments {
		if _, err := fmt.Fprintf(w, sh.deployment, i, ref(i), ref(i+1)); err != nil {
			return err
		}
		if i%3 == 0 {
			if _, err := fmt.Fprintf(w, sh.others, i, i, i); err != nil {
				return err
			}
		}
	}
	return nil
}

const deployment = `---
# Source: big/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d
  labels:
    app.kubernetes.io/name: app-%[1]d
    app.kubernetes.io/instance: big
    helm.sh/chart: big-1.0.0
spec:
  replicas: 2
  selector:
    matchLabels:
      app.kubernetes.io/name: app-%[1]d
  template:
    metadata:
      labels:
        app.kubernetes.io/name: app-%[1]d
    spec:
      containers:
        - name: app
          image: "%[2]s"
          ports:
            - name: http
              containerPort: 8080
          resources:
            limits:
              cpu: 500m
              memory: 256Mi
        - name: sidecar
          image: "%[3]s"
          args: ["--port", "9090"]
`

const service = `---
# Source: big/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: app-%[1]d
spec:
  selector:
    app.kubernetes.io/name: app-%[1]d
  ports:
    - name: http
      port: 80
      targetPort: http
---
# Source: big/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-%[2]d
data:
  config.yaml: |
    listen: ":8080"
    upstream: "http://app-%[3]d"
    timeout: 30s
`

// Deployments returns a small Helm-style stream for tests: one Deployment
// per image, named w0, w1, … (from app/templates/wN.yaml), in namespace
// when it is not "".
func Deployments(namespace string, images ...string) []byte {
	ns := ""
	if namespace != "" {
		ns = "\n  namespace: " + namespace
	}
	var b strings.Builder
	for i, im := range images {
		fmt.Fprintf(&b, "---\n# Source: app/templates/w%d.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: w%d%s\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: %s\n", i, i, ns, im)
	}
	return []byte(b.String())
}
