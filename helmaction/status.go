package helmaction

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fatih/color"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/cli/output"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
)

// WriteStatus writes rel as helm install prints it, in o.Output: see
// writeStatus.
func (o *InstallOptions) WriteStatus(w io.Writer, rel *release.Release) error {
	return writeStatus(w, rel, o.Output, o.settings(), o.HideNotes, "")
}

// WriteStatus writes rel as helm upgrade prints it, in o.Output: in a
// table after the line that says the release was upgraded or, when
// installed (Upgrade's --install found none), that it is installed now;
// see writeStatus.
func (o *UpgradeOptions) WriteStatus(w io.Writer, rel *release.Release, installed bool) error {
	lead := fmt.Sprintf("Release %q has been upgraded. Happy Helming!\n", o.ReleaseName)
	if installed {
		lead = fmt.Sprintf("Release %q does not exist. Installing it now.\n", o.ReleaseName)
	}
	return writeStatus(w, rel, o.Output, o.settings(), o.HideNotes, lead)
}

// writeStatus writes rel as Helm 4.3.1's helm install and upgrade do. JSON
// and YAML are the whole release. A table (after lead) is the name, time,
// namespace, status, revision, description and test suite; with
// settings.Debug the values the user gave and the computed ones; after a
// dry run, or with Debug, the hooks and the manifest; then the chart's
// notes, unless hideNotes. Colours follow settings.ColorMode as Helm's do
// ("auto": when stdout is a terminal and NO_COLOR is not set).
func writeStatus(w io.Writer, rel *release.Release, format output.Format, settings *cli.EnvSettings, hideNotes bool, lead string) error {
	switch format {
	case output.JSON:
		return output.EncodeJSON(w, rel)
	case output.YAML:
		return output.EncodeYAML(w, rel)
	}
	if rel == nil {
		return nil
	}
	var b strings.Builder
	b.WriteString(lead)
	writeRelease(&b, rel, settings.ColorMode == "always" || (settings.ColorMode != "never" && !color.NoColor))
	if settings.Debug {
		b.WriteString("USER-SUPPLIED VALUES:\n")
		if err := output.EncodeYAML(&b, rel.Config); err != nil {
			return err
		}
		b.WriteString("\n")
		all, err := util.CoalesceValues(rel.Chart, rel.Config)
		if err != nil {
			return fmt.Errorf("computing the values of release %s: %w", rel.Name, err)
		}
		b.WriteString("COMPUTED VALUES:\n")
		if err := output.EncodeYAML(&b, all.AsMap()); err != nil {
			return err
		}
		b.WriteString("\n")
	}
	if strings.EqualFold(rel.Info.Description, "Dry run complete") || settings.Debug {
		b.WriteString("HOOKS:\n")
		for _, h := range rel.Hooks {
			fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
		}
		fmt.Fprintf(&b, "MANIFEST:\n%s\n", rel.Manifest)
	}
	if !hideNotes && rel.Info.Notes != "" {
		fmt.Fprintf(&b, "NOTES:\n%s\n", strings.TrimSpace(rel.Info.Notes))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeRelease writes the table's head of rel as Helm 4.3.1 does: name,
// time, namespace and status (in colour when colors), revision,
// description and the test suite.
func writeRelease(b *strings.Builder, rel *release.Release, colors bool) {
	paint := func(s string, attr color.Attribute) string {
		c := color.New(attr)
		if colors {
			c.EnableColor()
		} else {
			c.DisableColor()
		}
		return c.Sprint(s)
	}
	fmt.Fprintf(b, "NAME: %s\n", rel.Name)
	if !rel.Info.LastDeployed.IsZero() {
		fmt.Fprintf(b, "LAST DEPLOYED: %s\n", rel.Info.LastDeployed.Format(time.ANSIC))
	}
	fmt.Fprintf(b, "NAMESPACE: %s\n", paint(rel.Namespace, color.FgCyan))
	status := rel.Info.Status.String()
	switch rel.Info.Status {
	case rcommon.StatusDeployed:
		status = paint(status, color.FgGreen)
	case rcommon.StatusFailed, rcommon.StatusUnknown:
		status = paint(status, color.FgRed)
	case rcommon.StatusPendingInstall, rcommon.StatusPendingUpgrade, rcommon.StatusPendingRollback, rcommon.StatusUninstalling:
		status = paint(status, color.FgYellow)
	}
	fmt.Fprintf(b, "STATUS: %s\n", status)
	fmt.Fprintf(b, "REVISION: %d\n", rel.Version)
	fmt.Fprintf(b, "DESCRIPTION: %s\n", rel.Info.Description)

	// The test hooks that ran; install and upgrade run none.
	tests := 0
	for _, h := range rel.Hooks {
		for _, e := range h.Events {
			if e != release.HookTest {
				continue
			}
			tests++
			if h.LastRun.StartedAt.IsZero() {
				continue
			}
			fmt.Fprintf(b, "TEST SUITE:     %s\nLast Started:   %s\nLast Completed: %s\nPhase:          %s\n",
				h.Name, h.LastRun.StartedAt.Format(time.ANSIC), h.LastRun.CompletedAt.Format(time.ANSIC), h.LastRun.Phase)
		}
	}
	if tests == 0 {
		b.WriteString("TEST SUITE: None\n")
	}
}
