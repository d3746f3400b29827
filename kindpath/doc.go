// Package kindpath is the vocabulary of where Kubernetes objects keep
// their images, which package config, the renderer, package pin and the
// flags share, without a YAML library. It holds the paths from the root
// of an object of one API group and kind to its pod specs (PodSpec), to
// image fields outside pod specs (Image), and to the mappings that get the
// checksum of those fields (Checksum); their syntax,
// "[GROUP/]KIND=FIELD.PATH" with "*" steps and FIELD[KEY=VALUE] selectors
// (Selector), a backslash before a ".", "|" or backslash of a key, and for
// an image path "|PATH.IN.TEXT" into the document a string holds
// (Image.Embedded), as the flags and the configuration file take it; and the
// built-in paths of the Kubernetes workloads, the workload CRDs and the
// operators (DefaultPodSpecs, DefaultImages, DefaultContainerImages).
//
// The renderer follows these paths through a document; the configuration
// file, the library and the command only parse, format and combine them.
// So this package imports no YAML library and nothing else of digestpin,
// and whoever reads a path (package config) needs not import the
// renderer.
//
// The names are meant to be read with the package's: kindpath.PodSpec,
// kindpath.ParseImage, kindpath.DefaultImages, not kindpath.ImagePath,
// which would say "path" twice. The package is not called paths because
// its users name their own variables paths.
package kindpath
