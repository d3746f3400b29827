package renderer

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKeelUses(t *testing.T) {
	t.Parallel()
	in := `apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web
    namespace: shop
    labels:
      keel.sh/policy: major
    annotations:
      keel.sh/policy: minor
      keel.sh/match-tag: "true"
  spec:
    template:
      spec:
        initContainers:
        - name: init
          image: shop/init:1
        containers:
        - name: web
          image: shop/web:1.4
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
  labels:
    keel.sh/policy: force
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers:
          - name: run
            image: shop/run:latest
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: plain
spec:
  template:
    spec:
      containers:
      - name: app
        image: shop/app:2
`
	uses, err := (&Renderer{}).KeelUses(context.Background(), []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []KeelUse{
		{Image: "shop/init:1", Policy: "minor", MatchTag: true, Workload: Workload{Kind: "Deployment", Namespace: "shop", Name: "web", Container: "init"}, Where: "document 1, line 19"},
		{Image: "shop/web:1.4", Policy: "minor", MatchTag: true, Workload: Workload{Kind: "Deployment", Namespace: "shop", Name: "web", Container: "web"}, Where: "document 1, line 22"},
		{Image: "shop/run:latest", Policy: "force", Workload: Workload{Kind: "CronJob", Name: "nightly", Container: "run"}, Where: "document 2, line 37"},
		{Image: "shop/app:2", Workload: Workload{Kind: "Deployment", Name: "plain", Container: "app"}, Where: "document 3, line 48"},
	}
	if diff := cmp.Diff(want, uses); diff != "" {
		t.Errorf("KeelUses (-want +got):\n%s", diff)
	}
}
