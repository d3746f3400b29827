// Package steady keeps a chart's own randomness from restarting pods.
//
// Some charts render differently every time from the same values: a
// certificate from genSelfSignedCert, a password from randAlphaNum, a test
// hook Pod with a random name suffix, a label made from now. Hashed into a
// checksum/config annotation, that randomness gives the pod template a new
// value on every render, and the workload restarts each time.
//
// Diff compares the stream digestpin is given with a second render of the
// same chart and values and names the volatile fields: the fields whose
// values differ between the two. Keep then compares digestpin's new output
// with the output it wrote last time for the same release and returns the
// previous output, byte for byte, when the two differ in nothing but
// volatile fields; otherwise the new output, whole. It never mixes fields of
// two renders. A difference in an image field, or in the checksum
// annotation of the images, is always real.
//
// Both compare documents as the Kubernetes API server reads them:
// sigs.k8s.io/yaml decodes each document to JSON, so formatting, comments,
// key order, anchors and merge keys do not matter, and a repeated key means
// what the decoder makes of it (the last one wins). Documents that are the
// same bytes in both streams mean the same and are not decoded again.
// Documents with nothing but comments are not objects and are left out.
// Two streams' documents are matched by their Helm "# Source:" file and
// their position among the documents of that file; documents without a
// "# Source:" comment by their position among such documents. Never by
// name, which a chart may generate. Helm 4 hands its post-renderer the
// file in an annotation instead (FileAnnotation), each file's documents in
// the file's order, where helm template prints them by kind: a stream that
// carries it is matched by file, kind and position among that file's
// documents of that kind, and the annotation is no field.
//
// A field path is written with dots between mapping keys, as in
// spec.template.metadata.labels.app. A key that is not made only of
// letters, digits, "_" and "-" is written quoted in brackets:
// metadata.annotations["checksum/config"], data["tls.crt"]. A list item
// is written [name=NAME] when every item of the list, in both renders, is
// a mapping with a distinct string name (containers, env, volumes,
// webhooks, ports…), and [INDEX] otherwise: containers[name=app].image,
// args[2]. A name that is not made only of letters, digits, ".", "_" and
// "-" is quoted: [name="a b"]. The root of a document is ".". A path names a whole value when the two
// renders differ in its shape (a key or item present in one only, a
// mapping in one and a list in the other, named items in another order,
// a list without names whose items do not line up by position).
//
// A volatile field allows Keep a difference at its own path only, never
// under it, and only of the kind the two renders showed: two numbers,
// strings or booleans allow another two of that type (strings where the
// two renders agree, see template); any other difference, only the two
// values the renders held. The documents of a file whose number of
// documents differs between the two renders have no volatile field.
//
// A run that uses both: Diff the input with the second render and warn
// with Volatility.Warnings; render the input; Keep the previous output
// (from a file, or a Store) against the new one and write
// Decision.Output; then, once it is written, store Decision.Output as the
// next run's previous output. Store keeps the previous output of each
// application; DirStore keeps it in a folder.
package steady
