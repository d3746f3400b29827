// Package lockfile reads and writes digestpin lock files: the image
// references of a render and the digests they resolved to, as YAML that is
// meant to be reviewed and committed next to the chart or the Argo CD
// application.
//
// A lock file looks like this:
//
//	# digestpin lock file: image references and the digests they resolve to.
//	version: 1
//	images:
//	  - reference: index.docker.io/library/nginx:1.27
//	    digest: sha256:…
//	  - reference: registry.example/app:1.4
//	    platform: linux/arm64
//	    digest: sha256:…
//
// References are written fully qualified and sorted, so the same
// resolutions always give the same bytes, whatever order they were made in.
// A reference may be spelt any way the registry accepts when the file is
// edited by hand ("nginx:1.27" and "docker.io/library/nginx:1.27" name the
// same entry). Platform is present only when the digest is one platform's
// manifest (digestpin --platform) rather than what the tag names.
//
// An entry may carry a pending digest: a newer one the registry serves,
// held back by a waiting period (digestpin --min-age) since it was first
// seen. The entry's digest stays the one pinned until then; the file is
// version 5 while any entry has one.
//
// The package never talks to a registry; see package resolve for that.
package lockfile
