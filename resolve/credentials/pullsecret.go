package credentials

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/digestpin/digestpin/resolve/internal/hosts"
	"github.com/digestpin/digestpin/resolve/internal/smallfile"
)

// ReadPullSecret reads the credentials of a Kubernetes image pull secret
// from file and returns them as a Keychain. file holds JSON, one of:
//
//   - the secret's .dockerconfigjson content, {"auths": {...}}: what
//     mounting a kubernetes.io/dockerconfigjson Secret as a volume yields
//     (the file <mount>/.dockerconfigjson), and what docker login writes;
//   - the legacy .dockercfg content of a kubernetes.io/dockercfg Secret,
//     {"registry": {...}};
//   - the Secret object itself as JSON (kubectl get secret NAME -o json),
//     with either key in data (base64) or stringData.
//
// A Secret manifest in YAML is not read: mount the Secret, or convert it
// with kubectl. Keys match registries the way the kubelet matches them:
// a scheme and a path are ignored ("https://index.docker.io/v1/" is
// Docker Hub), docker.io and registry-1.docker.io are Docker Hub, and a
// "*" matches one DNS label ("*.registry.example"). A registry without a
// key resolves to authn.Anonymous, so the Keychain composes with others
// in authn.NewMultiKeychain. file must be a regular file (or a link to
// one, as a mounted Secret is) of at most 4 MiB: a FIFO or a device is
// refused rather than waited on. Errors name the file but never its
// content.
// The Keychain is safe for concurrent use.
func ReadPullSecret(file string) (authn.Keychain, error) {
	b, err := smallfile.Read(file, maxPullSecret, true)
	if err != nil {
		return nil, fmt.Errorf("reading pull secret %s: %w", file, err)
	}
	kc, err := parsePullSecret(b)
	if err != nil {
		return nil, fmt.Errorf("reading pull secret %s: %w", file, err)
	}
	kc.file = file
	return kc, nil
}

// maxPullSecret caps a pull secret file; Kubernetes caps a Secret at
// 1 MiB.
const maxPullSecret = 4 << 20

// pullSecret is a Keychain over the auths of one pull secret.
type pullSecret struct {
	exact    map[string]authn.AuthConfig // registry host[:port] → credentials
	patterns []pattern                   // keys with a "*", sorted
	file     string                      // where it was read, for messages
}

type pattern struct {
	host string
	cfg  authn.AuthConfig
}

var _ authn.Keychain = (*pullSecret)(nil)

// Resolve implements authn.Keychain.
func (p *pullSecret) Resolve(target authn.Resource) (authn.Authenticator, error) {
	host := hosts.Normalise(target.RegistryStr())
	if cfg, ok := p.exact[host]; ok {
		return authn.FromConfig(cfg), nil
	}
	for _, pt := range p.patterns {
		if matchHost(pt.host, host) {
			return authn.FromConfig(pt.cfg), nil
		}
	}
	return authn.Anonymous, nil
}

// parsePullSecret reads the JSON forms ReadPullSecret accepts.
func parsePullSecret(b []byte) (*pullSecret, error) {
	b = bytes.TrimSpace(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")))
	if len(b) == 0 || b[0] != '{' {
		return nil, errors.New("not JSON: give the .dockerconfigjson content (mount the Secret as a volume) or the Secret as JSON (kubectl get secret NAME -o json); YAML is not read")
	}
	var top map[string]json.RawMessage
	if err := decodeJSON(b, &top); err != nil {
		return nil, err
	}
	// A Secret object: take its .dockerconfigjson or .dockercfg key.
	if kind, ok := top["kind"]; ok {
		var k string
		if err := decodeJSON(kind, &k); err != nil || k != "Secret" {
			return nil, errors.New("a JSON object with a kind that is not Secret")
		}
		inner, err := secretData(top)
		if err != nil {
			return nil, err
		}
		return parsePullSecret(inner)
	}
	auths := top
	if raw, ok := top["auths"]; ok {
		auths = nil
		if err := decodeJSON(raw, &auths); err != nil {
			return nil, fmt.Errorf("auths: %w", err)
		}
	}
	if len(auths) == 0 {
		return nil, errors.New("no registry credentials in it (want {\"auths\": {\"registry\": {...}}})")
	}
	p := &pullSecret{exact: map[string]authn.AuthConfig{}}
	keys := make([]string, 0, len(auths))
	for k := range auths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var cfg authn.AuthConfig
		if err := json.Unmarshal(auths[k], &cfg); err != nil {
			// Say which key, not what is in it: it holds credentials.
			return nil, fmt.Errorf("credentials for %q: unreadable (the auth field must be base64 of user:password)", k)
		}
		host := hosts.Normalise(k)
		if strings.Contains(host, "*") {
			p.patterns = append(p.patterns, pattern{host: host, cfg: cfg})
			continue
		}
		if _, dup := p.exact[host]; !dup {
			p.exact[host] = cfg
		}
	}
	return p, nil
}

// secretData returns the docker config inside a Secret object.
func secretData(secret map[string]json.RawMessage) ([]byte, error) {
	for _, key := range []string{".dockerconfigjson", ".dockercfg"} {
		var data map[string]string
		if raw, ok := secret["data"]; ok {
			if err := decodeJSON(raw, &data); err != nil {
				return nil, fmt.Errorf("reading the secret's data: %w", err)
			}
			if v, ok := data[key]; ok {
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					return nil, fmt.Errorf("reading the secret's data %s: not base64", key)
				}
				return b, nil
			}
		}
		if raw, ok := secret["stringData"]; ok {
			if err := decodeJSON(raw, &data); err != nil {
				return nil, fmt.Errorf("reading the secret's stringData: %w", err)
			}
			if v, ok := data[key]; ok {
				return []byte(v), nil
			}
		}
	}
	return nil, errors.New("a Secret without a .dockerconfigjson or .dockercfg key")
}

// decodeJSON is json.Unmarshal with errors that quote no input.
func decodeJSON(b []byte, v any) error {
	err := json.Unmarshal(b, v)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Errorf("invalid JSON: a %s where %s was expected", te.Value, te.Type)
	}
	return errors.New("invalid JSON")
}

// matchHost matches a host against a key with "*" labels, as the kubelet
// does: the same number of labels, each matching, and the same port.
func matchHost(pat, host string) bool {
	pn, pp := splitPort(pat)
	hn, hp := splitPort(host)
	if pp != hp {
		return false
	}
	pl, hl := strings.Split(pn, "."), strings.Split(hn, ".")
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		if ok, err := path.Match(pl[i], hl[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitPort(h string) (string, string) {
	if i := strings.LastIndex(h, ":"); i >= 0 && !strings.Contains(h[i:], "]") {
		return h[:i], h[i+1:]
	}
	return h, ""
}
