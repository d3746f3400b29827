// Package config reads digestpin's configuration file (--config FILE),
// without the renderer or a registry client: the declarations that a workstation, a CI step and an Argo CD plugin share,
// so that each renders a chart the same way.
//
// The file is one YAML document, a versioned object:
//
//	apiVersion: digestpin.dev/v1alpha1
//	kind: Config
//	# More pod specs, as --pod-spec-path takes them.
//	podSpecPaths:
//	  - example.com/Worker=spec.pools.*.template.spec
//	# More image fields outside pod specs, as --image-path takes them.
//	imagePaths:
//	  - example.com/Runner=spec.jobs.*.tool.image
//	  - apps/Deployment=spec.template.spec.containers.*.env[name=AGENT_IMAGE].value
//	# Where the checksum of a kind's image fields goes, as
//	# --checksum-path takes it.
//	checksumPaths:
//	  - example.com/Runner=spec.jobs.*
//	# Tag policies and their filters, as --tag-policy, --tag-allow and
//	# --tag-ignore take them; the flags' parser checks them.
//	tagPolicies:
//	  - registry.example/shop/web=semver:~1.4
//	tagIgnore:
//	  - registry.example/shop/web=-rc
//
// apiVersion and kind are required; every other key is optional. A key
// that this version does not know, a key given twice, a value of the wrong
// type or a path that does not parse is an error naming the file and the
// line, so that a typo never silently leaves images unpinned. Later keys
// (tag policies, a cache URL) are added to the same object, under the
// same apiVersion as long as old files keep their meaning.
package config
