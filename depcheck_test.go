package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLayering keeps the architecture honest: the renderer never imports
// the registry client or credentials, the resolver never touches YAML, the
// resolution vocabulary they share imports neither (nor anything else of
// ours), the configuration file is read without a registry client or the
// renderer, the Helm SDK is reached only through helmaction (for digestpin
// template), and the deterministic generators import nothing of Helm,
// Kubernetes or ours. The kind/path vocabulary (kindpath) imports no YAML
// library and nothing of ours, and the renderer follows its paths rather
// than declaring its own. The renderer's stream layer (renderer/stream)
// imports nothing of images, registries or ours. The Redis client stays in internal/redisstore:
// the renderer, the resolver, the library and their shared vocabulary
// never import it. Within the resolver, the tag policies and the
// credentials import neither the resolver nor its transport, and the
// transport imports no credentials. The pinning flags (pin/pinflags)
// import no Helm and nothing of the command.
// sigstoreDeps are the import path prefixes of signature verification:
// sigstore-go (rekor among it) and what it brings, gRPC and the
// transparency log formats. Protobuf is TestPinWithoutSigstore's.
var sigstoreDeps = []string{"github.com/sigstore/", "google.golang.org/grpc", "github.com/golang/protobuf", "github.com/transparency-dev/"}

func TestLayering(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pkg       string
		forbidden []string // import path prefixes
		notPkgs   []string // packages, not those below them
		imports   []string // packages that pkg imports itself
	}{
		{pkg: "./renderer", forbidden: []string{"github.com/google/go-containerregistry/pkg/v1/remote", "github.com/google/go-containerregistry/pkg/authn", "github.com/digestpin/digestpin/resolve"}},
		{pkg: "./resolve", forbidden: []string{"sigs.k8s.io/kustomize/kyaml", "go.yaml.in/yaml", "gopkg.in/yaml", "github.com/digestpin/digestpin/renderer"}},
		{pkg: "./resolution", forbidden: []string{"github.com/google/go-containerregistry/pkg/v1/remote", "github.com/google/go-containerregistry/pkg/authn", "sigs.k8s.io/kustomize/kyaml", "go.yaml.in/yaml", "github.com/digestpin/digestpin/"}},
		// The resolver's layers, as go-containerregistry's remote over
		// transport over authn: the tag policies and the credentials
		// stand apart from the resolver, the transport knows no
		// credentials, and none of them reads YAML or reaches Redis.
		{pkg: "./resolve/tagpolicy", notPkgs: []string{"github.com/digestpin/digestpin/resolve"}, forbidden: []string{"github.com/digestpin/digestpin/resolve/transport", "github.com/digestpin/digestpin/resolve/credentials"}},
		{pkg: "./resolve/credentials", notPkgs: []string{"github.com/digestpin/digestpin/resolve"}, forbidden: []string{"github.com/digestpin/digestpin/resolve/transport", "github.com/digestpin/digestpin/resolve/tagpolicy"}},
		{pkg: "./resolve/transport", notPkgs: []string{"github.com/digestpin/digestpin/resolve"}, forbidden: []string{"github.com/google/go-containerregistry/pkg/authn", "github.com/digestpin/digestpin/resolve/credentials", "github.com/digestpin/digestpin/resolve/tagpolicy"}},
		{pkg: "./resolve", forbidden: []string{"github.com/digestpin/digestpin/resolve/tagpolicy"}},
		{pkg: "./config", forbidden: []string{"github.com/google/go-containerregistry/pkg/v1/remote", "github.com/google/go-containerregistry/pkg/authn", "github.com/digestpin/digestpin/resolve", "github.com/digestpin/digestpin/renderer"}},
		// The paths that config, pin, the renderer and the command share.
		{pkg: "./kindpath", forbidden: []string{"sigs.k8s.io/kustomize/kyaml", "go.yaml.in/yaml", "gopkg.in/yaml", "sigs.k8s.io/yaml", "github.com/digestpin/digestpin/"}},
		{pkg: "./renderer", imports: []string{"github.com/digestpin/digestpin/kindpath", "github.com/digestpin/digestpin/renderer/stream"}},
		// The renderer's stream layer knows nothing of images: no
		// registry client or reference parser, nothing of ours.
		{pkg: "./renderer/stream", forbidden: []string{"github.com/google/go-containerregistry", "github.com/digestpin/digestpin/", "github.com/redis/", "helm.sh/", "k8s.io/client-go"}},
		{pkg: "./config", imports: []string{"github.com/digestpin/digestpin/kindpath"}},
		{pkg: "./renderer", forbidden: []string{"github.com/redis/"}},
		{pkg: "./resolve", forbidden: []string{"github.com/redis/"}},
		{pkg: "./resolution", forbidden: []string{"github.com/redis/"}},
		{pkg: "./resolve/tagpolicy", forbidden: []string{"github.com/redis/", "sigs.k8s.io/kustomize/kyaml", "go.yaml.in/yaml", "gopkg.in/yaml", "sigs.k8s.io/yaml"}},
		{pkg: "./resolve/credentials", forbidden: []string{"github.com/redis/", "sigs.k8s.io/kustomize/kyaml", "go.yaml.in/yaml", "gopkg.in/yaml", "sigs.k8s.io/yaml"}},
		{pkg: "./resolve/transport", forbidden: []string{"github.com/redis/", "sigs.k8s.io/kustomize/kyaml", "go.yaml.in/yaml", "gopkg.in/yaml", "sigs.k8s.io/yaml"}},
		{pkg: "./pin", forbidden: []string{"github.com/redis/"}},
		// Helm's SDK (and with it client-go) only through helmaction,
		// which digestpin template uses; the library packages, and the
		// deterministic generators, stay free of it.
		{pkg: "./pin", forbidden: []string{"helm.sh/", "k8s.io/client-go"}},
		{pkg: "./renderer", forbidden: []string{"helm.sh/", "k8s.io/client-go"}},
		{pkg: "./resolve", forbidden: []string{"helm.sh/", "k8s.io/client-go"}},
		// The deterministic generators stay small and Helm-free: sprig is
		// their tests' reference only.
		{pkg: "./detgen", forbidden: []string{"helm.sh/", "k8s.io/", "sigs.k8s.io/", "github.com/google/go-containerregistry", "github.com/Masterminds/sprig", "github.com/digestpin/digestpin/"}},
		// Signature verification (sigstore-go, and with it gRPC and
		// rekor) only through package verify, which a Pinner takes as
		// verification.Policies: an embedder who only pins links none
		// of it. The vocabulary they share, and the lock file that
		// records who signed, stay as small.
		{pkg: "./pin", forbidden: sigstoreDeps},
		{pkg: "./postrender", forbidden: sigstoreDeps},
		{pkg: "./lockfile", forbidden: sigstoreDeps},
		{pkg: "./verification", forbidden: append(slices.Clone(sigstoreDeps), "google.golang.org/protobuf", "sigs.k8s.io/kustomize/kyaml", "github.com/digestpin/digestpin/")},
		// The pinning flags an embedder adds to its own command: no
		// Helm (nor client-go), nothing of the digestpin command.
		{pkg: "./pin/pinflags", forbidden: []string{"helm.sh/", "k8s.io/client-go", "github.com/digestpin/digestpin/internal/cli"}},
		{pkg: "./helmaction", forbidden: []string{"github.com/google/go-containerregistry/pkg/v1/remote", "github.com/digestpin/digestpin/"}},
	} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", tc.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tc.pkg, err)
		}
		deps := strings.Fields(string(out))
		if len(tc.imports) > 0 {
			out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, tc.pkg).Output()
			if err != nil {
				t.Fatalf("go list %s: %v", tc.pkg, err)
			}
			imports := strings.Fields(string(out))
			for _, want := range tc.imports {
				if !slices.Contains(imports, want) {
					t.Errorf("%s does not import %s, which it must", tc.pkg, want)
				}
			}
		}
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s listed %d packages: not a real listing", tc.pkg, len(deps))
		}
		self := "github.com/digestpin/digestpin/" + strings.TrimPrefix(tc.pkg, "./")
		for _, d := range deps {
			if d == self {
				continue
			}
			if slices.Contains(tc.notPkgs, d) {
				t.Errorf("%s depends on %s, which it must not", tc.pkg, d)
			}
			for _, f := range tc.forbidden {
				if d == f || strings.HasPrefix(d, f+"/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(d, f)) {
					t.Errorf("%s depends on %s, which it must not", tc.pkg, d)
				}
			}
		}
	}
}

// TestSlimBuildLinksNoHelm keeps the build that is released as digestpin
// (the module's root main, scripts/release.sh) free of Helm's SDK and
// Kubernetes' client, which digestpin-helm (cmd/digestpin-helm, through
// internal/cli/helmcmd) carries: a package of the slim build that imports
// helmaction or helmcmd's packages would bring 50 MB and 30 ms of start-up
// back to every render.
func TestSlimBuildLinksNoHelm(t *testing.T) {
	t.Parallel()
	forbidden := []string{"helm.sh/", "k8s.io/client-go/", "github.com/digestpin/digestpin/helmaction", "github.com/digestpin/digestpin/internal/cli/helmcmd"}
	for _, tc := range []struct {
		main string
		want bool // whether the build links them
	}{
		{main: "."},
		{main: "./cmd/digestpin-helm", want: true}, // the full build does: the check is real
	} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", tc.main).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tc.main, err)
		}
		var linked []string
		for _, d := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if strings.HasPrefix(d, f) || d == strings.TrimSuffix(f, "/") {
					linked = append(linked, d)
				}
			}
		}
		if got := len(linked) > 0; got != tc.want {
			t.Errorf("go list -deps %s links %d packages of %q (%q), want linked = %v", tc.main, len(linked), forbidden, linked[:min(3, len(linked))], tc.want)
		}
	}
}

// TestPinWithoutSigstore: a program that only pins links no signature
// verification. Package pin holds no sigstore, gRPC or rekor package
// (TestLayering), and no protobuf package beyond those that kyaml's
// OpenAPI schema brings the renderer: sigstore's messages are protobuf.
func TestPinWithoutSigstore(t *testing.T) {
	t.Parallel()
	protobuf := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		var deps []string
		for _, d := range strings.Fields(string(out)) {
			if strings.HasPrefix(d, "google.golang.org/protobuf/") {
				deps = append(deps, d)
			}
		}
		return deps
	}
	renderer := protobuf("./renderer")
	for _, d := range protobuf("./pin") {
		if !slices.Contains(renderer, d) {
			t.Errorf("./pin depends on %s, which the renderer does not: signature verification belongs to package verify", d)
		}
	}
}
