package testfiles

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// ArgoCDConfigDir is where the Argo CD plugin's sidecar has the plugin's
// files (the init container digestpin-install places them there):
// plugin.yaml names its scripts by their path in it.
const ArgoCDConfigDir = "/home/argocd/cmp-server/config/"

// LayOutArgoCDPlugin writes the Argo CD plugin's files, as the init
// container places them, into dir: scripts/argocd/plugin.yaml of the
// checkout root and the scripts its commands run, with ArgoCDConfigDir
// rewritten to dir.
func LayOutArgoCDPlugin(t TB, root, dir string) {
	t.Helper()
	scripts := filepath.Join(root, "scripts", "argocd")
	files := []string{"plugin.yaml"}
	for _, p := range regexp.MustCompile(regexp.QuoteMeta(ArgoCDConfigDir)+`[\w.-]+\.sh`).FindAllString(string(Read(t, filepath.Join(scripts, "plugin.yaml"))), -1) {
		if f := strings.TrimPrefix(p, ArgoCDConfigDir); !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	if len(files) < 2 {
		t.Fatal(fmt.Sprintf("scripts/argocd/plugin.yaml runs no script in %s", ArgoCDConfigDir))
	}
	for _, f := range files {
		b := bytes.ReplaceAll(Read(t, filepath.Join(scripts, f)), []byte(ArgoCDConfigDir), []byte(dir+"/"))
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil { //nolint:gosec // the plugin's files are world-readable
			t.Fatal(err)
		}
	}
}
