// Package renderer is the image filter, a stream of Kubernetes manifests in
// and the same stream out, that never touches the network: it pins every
// container image and image volume in a pod spec to the digest that the
// caller's Resolver gives, and adds to each pod template a checksum
// annotation of its pinned images. Pod specs are found by API group, kind
// and field path (kindpath.DefaultPodSpecs: the Kubernetes workloads, the
// workload CRDs deployed with Helm and operator resources), and so are
// single image fields outside pod specs (kindpath.DefaultImages: Argo
// Workflows, Tekton, the Spark operator, operator resources), whose
// checksum goes where a kindpath.Checksum says, if anywhere; an image key
// anywhere else is data. A document written as JSON stays JSON. Package
// kindpath declares and parses the paths; this package follows them through
// the YAML.
//
// The renderer works on a multi-document YAML stream as Helm, kustomize or
// kubectl write it. It works in three phases: it splits the stream into
// documents and collects every image reference (validating them before any
// network call), then resolves the distinct references concurrently, then
// rewrites the documents that waited for a digest. Documents are
// independent: the first and the last phase work on several at once, each
// document's nodes in one goroutine, and the output keeps the stream's
// order. A document with nothing to change is written back as the exact
// bytes it was read from.
//
// The package is the image filter over the stream layer of package
// stream, which splits, parses and writes the documents and knows
// nothing of images (after KYAML's kio and its filters): here are the
// image fields and their paths, the policy on what to pin, the hand-off
// to the Resolver, and the edit. The edit is a finder (find.go), which
// walks a document and returns the uses of each image with their nodes,
// routes and pod specs, changing nothing, and an applier (apply.go),
// which makes the image and annotation changes once the digests are
// known (after KO's selector and resolve). The first phase finds only; a
// document whose digests the stream carries, all of them, needs no
// resolver and is applied at once.
//
// Documents end where Kubernetes' YAML reader (k8s.io/apimachinery's,
// through which kubectl, Helm's kube client and Argo CD read manifests)
// ends them: at every line that starts with "---" and nothing but a
// comment after it; a stream that reader refuses is refused, and so is
// a document that Kubernetes could not read, with an image field or
// without (malformed YAML, anything but a mapping, YAML after "...").
//
// A document means what the Kubernetes API server's decoder
// (sigs.k8s.io/yaml) makes of it. Where a first-key reading could differ
// on the way to an image (repeated keys, merge keys that override, keys
// spelt as !!binary or as aliases), or where a change would reach data
// outside pod specs through an anchor, the document is refused rather
// than pinned wrongly. Memory for parsed documents is bounded by MaxNodes.
//
// Beside the filter, Snapshot and Compare tell what else differs between
// two renders of a release (package pin's change set against an earlier
// output): the pod templates, found as the filter finds them, without
// what the filter writes into them, and the keys of Secrets, compared by
// hash and named by key, never by value.
package renderer
