// Package helmsdk shows digestpin in a program that embeds the Helm SDK:
// action.Install, in client-only dry-run mode (what `helm template` does,
// no cluster needed), renders a chart through digestpin's PostRenderer,
// which pins its images to the digests their registries serve.
//
// It is a separate module so that digestpin does not depend on Helm. The
// same PostRenderer fits Helm 4's SDK (helm.sh/helm/v4/pkg/action), whose
// post-renderer interface has the same Run method.
package helmsdk

import (
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmpostrender "helm.sh/helm/v3/pkg/postrender"

	"github.com/digestpin/digestpin/postrender"
)

// digestpin's PostRenderer is a Helm post-renderer.
var _ helmpostrender.PostRenderer = (*postrender.PostRenderer)(nil)

// Render renders the chart at chartPath as release name with vals, like
// `helm template name chartPath`, with pr as its post-renderer, and returns
// the release's manifest. Helm 3 post-renders the manifest only: the
// chart's hooks and test pods are in neither pr's input nor the result
// (helm/helm#7891).
func Render(chartPath, name string, vals map[string]any, pr helmpostrender.PostRenderer) (string, error) {
	chrt, err := loader.Load(chartPath)
	if err != nil {
		return "", fmt.Errorf("loading chart %s: %w", chartPath, err)
	}

	// Client-only and dry-run: Install fakes the cluster's capabilities
	// and its Kubernetes client, and stores the release in memory.
	cfg := &action.Configuration{Log: func(string, ...any) {}}
	install := action.NewInstall(cfg)
	install.ClientOnly = true
	install.DryRun = true
	install.ReleaseName = name
	install.Namespace = "default"
	install.PostRenderer = pr

	rel, err := install.Run(chrt, vals)
	if err != nil {
		return "", fmt.Errorf("rendering chart %s: %w", chartPath, err)
	}
	return rel.Manifest, nil
}
