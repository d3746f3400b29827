// Package credentials is the keychain side of the resolver: where the
// credentials for a registry come from, and where they came from, for
// the message of a registry that refuses them.
//
// DockerKeychain is go-containerregistry's default keychain (the docker
// config with its credential helpers, or Podman's auth.json);
// ReadPullSecret reads a Kubernetes image pull secret as a keychain; and
// Keychains asks several in turn, as authn.NewMultiKeychain does, and
// remembers which one answered. Describe says, for any of them, which
// file, pull secret or credential helper the credentials came from, or
// where it looked: never the credentials themselves.
//
// Every Keychain here is an authn.Keychain, so package resolve (and any
// other go-containerregistry client) takes it as it is. The package knows
// nothing of registries' requests: it neither imports package resolve
// nor the HTTP layer under it.
package credentials
