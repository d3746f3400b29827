// Package postrender pins container images from Go programs that embed the
// Helm SDK. Its PostRenderer has the Run method of Helm's post-renderer
// interfaces (helm.sh/helm/v3/pkg/postrender.PostRenderer and
// helm.sh/helm/v4/pkg/postrenderer.PostRenderer), so it can be set as the
// PostRenderer of action.Install, action.Upgrade or a template run, without
// this module depending on Helm:
//
//	install := action.NewInstall(cfg)
//	install.PostRenderer = &postrender.PostRenderer{}
//
// Each Run does what the digestpin command does to its input: it resolves
// every image to the digest its registry serves now, pins it, and adds the
// checksum annotation to each pod template. On error it returns no
// manifests, so Helm installs nothing.
//
// It verifies signatures when its options have signature policies
// (pin.Options.Verify), as the command's --verify does: set them to
// package verify's Policies, which verify with sigstore-go. This package
// does not import it, so a program that only pins links no sigstore, gRPC
// or rekor; a configuration file's verify policies need Verify set (an
// empty verify.Policies will do), or New and Run fail.
package postrender
