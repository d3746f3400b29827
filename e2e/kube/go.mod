// The rollout tests of digestpin against a real Kubernetes control plane
// (see doc.go): a module of its own, as e2e/cmpserver is, so that neither
// digestpin nor its other tests depend on what the tests run. The control
// plane's binaries are built from the module in tools/.
module github.com/digestpin/digestpin/e2e/kube

go 1.26.0

require (
	github.com/digestpin/digestpin v0.0.0-00010101000000-000000000000
	github.com/google/go-containerregistry v0.22.1
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/docker/cli v29.7.2+incompatible // indirect
	github.com/docker/docker-credential-helpers v0.9.5 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/digestpin/digestpin => ../..
