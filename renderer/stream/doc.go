// Package stream is the renderer's stream layer, which knows nothing of
// images: a multi-document YAML stream in, the same stream with some
// scalars and annotations changed out. It cuts the stream into documents
// where Kubernetes' YAML reader cuts it (Split), parses each document
// (Parse: a quick reader for the plain block style Helm writes, yaml.v3 for
// the rest) within a node budget against hostile input (MaxNodes, Budget,
// the alias and merge key guard), looks keys up the way the API server's
// decoder reads them (Get, Str, Values), writes a document's changes
// (Write: spliced into its own bytes, or encoded, as JSON when it was
// JSON), and puts the output together from the pieces of the input (Piece,
// Output).
//
// Images, registries and digests are the caller's (package renderer, the
// image filter): which scalars change, to what, and which mappings get
// which annotation. After KYAML's kio, which reads and writes the resources
// that its filters change.
package stream
