package credentials

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
)

// describer is a Keychain that says where its credentials for a registry
// come from, for the message of a registry that refuses them: when found,
// where the credentials it gave came from; otherwise where it looked.
// Never the credentials themselves.
type describer interface {
	describe(target authn.Resource, found bool) string
}

// Keychains returns a Keychain that asks each of kcs in turn and gives the
// first credentials one of them has, as authn.NewMultiKeychain does, and
// remembers which one gave them, for messages: a registry that refuses
// them (401, 403) is named with where they came from ("pull secret FILE",
// "docker config FILE", "credential helper docker-credential-NAME"). It is
// safe for concurrent use.
func Keychains(kcs ...authn.Keychain) authn.Keychain {
	return &keychains{kcs: kcs}
}

type keychains struct {
	kcs  []authn.Keychain
	gave sync.Map // target.String() → the index in kcs that gave credentials
}

var (
	_ authn.Keychain        = (*keychains)(nil)
	_ authn.ContextKeychain = (*keychains)(nil)
	_ describer             = (*keychains)(nil)
)

// Resolve implements authn.Keychain.
func (k *keychains) Resolve(target authn.Resource) (authn.Authenticator, error) {
	return k.ResolveContext(context.Background(), target)
}

// ResolveContext implements authn.ContextKeychain.
func (k *keychains) ResolveContext(ctx context.Context, target authn.Resource) (authn.Authenticator, error) {
	for i, kc := range k.kcs {
		auth, err := authn.Resolve(ctx, kc, target)
		if err != nil {
			return nil, err
		}
		if auth != authn.Anonymous {
			k.gave.Store(target.String(), i)
			return auth, nil
		}
	}
	k.gave.Delete(target.String())
	return authn.Anonymous, nil
}

func (k *keychains) describe(target authn.Resource, found bool) string {
	if found {
		if i, ok := k.gave.Load(target.String()); ok {
			return Describe(k.kcs[i.(int)], target, true)
		}
		return ""
	}
	var where []string
	for _, kc := range k.kcs {
		if d := Describe(kc, target, false); d != "" {
			where = append(where, d)
		}
	}
	return strings.Join(where, ", ")
}

// Describe says where kc's credentials for target come from, for the
// message of a registry that refuses them: when found, where the
// credentials kc gave came from ("docker config FILE", "pull secret
// FILE", "credential helper docker-credential-NAME (docker config
// FILE)"); otherwise where kc looked. Never the credentials themselves.
// It is "" for a Keychain that cannot say: one that is not of this
// package.
func Describe(kc authn.Keychain, target authn.Resource, found bool) string {
	if d, ok := kc.(describer); ok {
		return d.describe(target, found)
	}
	return ""
}

func (p *pullSecret) describe(authn.Resource, bool) string {
	if p.file == "" {
		return ""
	}
	return "pull secret " + p.file
}

// DockerKeychain is authn.DefaultKeychain, the docker config
// (DOCKER_CONFIG, ~/.docker/config.json, or Podman's auth.json) with its
// credential helpers, that also says where its credentials come from:
// which file, and which credential helper or store. It is the default of
// WithKeychain. It is safe for concurrent use.
var DockerKeychain authn.Keychain = dockerKeychain{}

type dockerKeychain struct{}

var (
	_ authn.ContextKeychain = dockerKeychain{}
	_ describer             = dockerKeychain{}
)

// Resolve implements authn.Keychain.
func (dockerKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	return authn.DefaultKeychain.Resolve(target)
}

// ResolveContext implements authn.ContextKeychain.
func (dockerKeychain) ResolveContext(ctx context.Context, target authn.Resource) (authn.Authenticator, error) {
	return authn.Resolve(ctx, authn.DefaultKeychain, target)
}

func (dockerKeychain) describe(target authn.Resource, _ bool) string {
	file := dockerConfigFile()
	if file == "" {
		return "no docker config: neither $DOCKER_CONFIG/config.json nor ~/.docker/config.json"
	}
	// A credential helper for the registry, else the credential store,
	// else the file's own auths: docker's order.
	var cf struct {
		CredHelpers map[string]string `json:"credHelpers"`
		CredsStore  string            `json:"credsStore"`
	}
	if b, err := os.ReadFile(file); err == nil && json.Unmarshal(b, &cf) == nil {
		if h := cf.CredHelpers[target.RegistryStr()]; h != "" {
			return fmt.Sprintf("credential helper docker-credential-%s (docker config %s)", h, file)
		}
		if cf.CredsStore != "" {
			return fmt.Sprintf("credential store docker-credential-%s (docker config %s)", cf.CredsStore, file)
		}
	}
	return "docker config " + file
}

// dockerConfigFile returns the file authn.DefaultKeychain reads, or ""
// when it reads none, by its rules: $DOCKER_CONFIG/config.json or
// ~/.docker/config.json (either existing, the first is read when
// DOCKER_CONFIG is set), else $REGISTRY_AUTH_FILE, else Podman's
// containers/auth.json under $XDG_RUNTIME_DIR or the configuration
// folder.
func dockerConfigFile() string {
	exists := func(p string) bool {
		fi, err := os.Stat(p) //nolint:gosec // the docker config file the environment names, as docker reads it
		return err == nil && !fi.IsDir()
	}
	home, _ := os.UserHomeDir()
	dc := os.Getenv("DOCKER_CONFIG")
	if (home != "" && exists(filepath.Join(home, ".docker", "config.json"))) || (dc != "" && exists(filepath.Join(dc, "config.json"))) {
		if dc != "" {
			return filepath.Join(dc, "config.json")
		}
		return filepath.Join(home, ".docker", "config.json")
	}
	if p := filepath.Clean(os.Getenv("REGISTRY_AUTH_FILE")); os.Getenv("REGISTRY_AUTH_FILE") != "" && exists(p) {
		return p
	}
	configDir := os.Getenv("XDG_CONFIG_HOME")
	if configDir == "" && home != "" {
		configDir = filepath.Join(home, ".config")
	}
	podman := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "containers", "auth.json")
	if (os.Getenv("XDG_RUNTIME_DIR") == "" || !exists(podman)) && configDir != "" {
		podman = filepath.Join(configDir, "containers", "auth.json")
	}
	if exists(podman) {
		return podman
	}
	return ""
}
