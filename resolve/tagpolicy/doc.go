// Package tagpolicy chooses the tag an image follows, above the registry
// resolver: a TagPolicy (semver, latest, name, digest) picks one of a
// repository's tags, TagPolicies holds the policies of a run by image,
// and KeelStrategy turns Keel's keel.sh/policy into a strategy.
//
// A PolicyResolver lists each repository with a policy once through a
// TagSource (a *resolve.Resolver is one: every page of tags/list),
// chooses, and resolves the chosen tag with the resolution.Resolver it
// wraps; its choices may be kept in the resolution cache
// (WithChoiceCache), beside the digests, under keys of their own.
//
// The package asks registries nothing itself and never imports package
// resolve: it takes what it needs of it, a TagSource and a Cache.
package tagpolicy
