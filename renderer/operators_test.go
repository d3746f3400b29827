package renderer

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOperatorFieldsUntouched renders operator resources whose image-like
// values are not references to pin as written: each comes out byte for
// byte as it came in, and nothing is resolved.
func TestOperatorFieldsUntouched(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ desc, in string }{
		{
			desc: "a Grafana version, which the operator puts after its own image name",
			in:   "apiVersion: grafana.integreatly.org/v1beta1\nkind: Grafana\nmetadata:\n  name: g\nspec:\n  version: 12.1.0\n",
		},
		{
			desc: "a Grafana image without a tag",
			in:   "apiVersion: grafana.integreatly.org/v1beta1\nkind: Grafana\nmetadata:\n  name: g\nspec:\n  version: registry.example/grafana/grafana\n",
		},
		{
			desc: "a Crossplane package without a registry, which Crossplane completes with its own",
			in:   "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: p\nspec:\n  package: crossplane-contrib/provider-aws:v1.0.0\n",
		},
		{
			desc: "a Crossplane package of a registry-like first component without a dot",
			in:   "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: f\nspec:\n  package: upbound/function-x:v0.1.0\n",
		},
		{
			desc: "a Prometheus of another group",
			in:   "apiVersion: example.com/v1\nkind: Prometheus\nmetadata:\n  name: p\nspec:\n  image: registry.example/prometheus:v3\n  containers:\n  - name: c\n    image: registry.example/c:1\n",
		},
		{
			desc: "a Prometheus's deprecated base image, tag and SHA",
			in:   "apiVersion: monitoring.coreos.com/v1\nkind: Prometheus\nmetadata:\n  name: p\nspec:\n  baseImage: quay.io/prometheus/prometheus\n  tag: v2.55.1\n  sha: abc\n",
		},
		{
			desc: "a KafkaConnect build's output image, where Strimzi pushes",
			in:   "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaConnect\nmetadata:\n  name: c\nspec:\n  build:\n    output:\n      type: docker\n      image: registry.example/connect:latest\n",
		},
		{
			desc: "an Instrumentation's env and exporter",
			in:   "apiVersion: opentelemetry.io/v1alpha1\nkind: Instrumentation\nmetadata:\n  name: i\nspec:\n  exporter:\n    endpoint: http://collector:4318\n  env:\n  - name: IMAGE\n    value: registry.example/app:1\n",
		},
		{
			desc: "an empty CloudNativePG image name and an image catalog reference",
			in:   "apiVersion: postgresql.cnpg.io/v1\nkind: Cluster\nmetadata:\n  name: c\nspec:\n  imageName: \"\"\n  imageCatalogRef:\n    kind: ImageCatalog\n    name: postgresql\n    major: 17\n",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixed()
			r := &Renderer{Resolver: f}
			res, err := r.Render(context.Background(), []byte(tc.in))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			if diff := cmp.Diff(tc.in, string(res.Bytes())); diff != "" {
				t.Errorf("Render() changed the document (-in +out):\n%s", diff)
			}
			if len(res.Images) != 0 {
				t.Errorf("Render() found images %v, want none", res.Images)
			}
		})
	}
}
