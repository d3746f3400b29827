package cmpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v3/cmpserver/apiclient"
	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/app/discovery"
	apppathutil "github.com/argoproj/argo-cd/v3/util/app/path"
	"github.com/argoproj/argo-cd/v3/util/cmp"
	utilio "github.com/argoproj/argo-cd/v3/util/io"
	"github.com/argoproj/gitops-engine/pkg/utils/kube"
	grpc_retry "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/protobuf/types/known/emptypb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/digestpin/digestpin/internal/testfiles"
)

// pluginName is the plugin's metadata.name, the name Applications give.
const pluginName = "digestpin"

// generateTimeout bounds one request, as the repo server's gRPC deadline
// (60 s by default) does.
const generateTimeout = 60 * time.Second

// tool returns the path of the executable named by env (testfiles.Tool:
// skipped outside CI when missing, failed in CI).
func tool(t *testing.T, env, target string) string {
	t.Helper()
	return testfiles.Tool(t, env, env+" does not name an executable; run the tests with `make test` (the "+target+" target builds it)")
}

// repoRoot returns the digestpin repository's root folder.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// sidecarEnv returns the environment scripts/argocd/repo-server-patch.yaml
// gives the sidecar, with its folders moved by move.
func sidecarEnv(t *testing.T, move *strings.Replacer) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", "argocd", "repo-server-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var patch struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Env []struct {
							Name  string `json:"name"`
							Value string `json:"value"`
						} `json:"env"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &patch); err != nil {
		t.Fatalf("parsing scripts/argocd/repo-server-patch.yaml: %v", err)
	}
	if n := len(patch.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("scripts/argocd/repo-server-patch.yaml adds %d containers, want 1", n)
	}
	var env []string
	for _, e := range patch.Spec.Template.Spec.Containers[0].Env {
		// PATH names the sidecar's folders (digestpin first, then the
		// image's): the server's PATH has the test's tools first instead.
		if e.Name == "PATH" {
			continue
		}
		env = append(env, e.Name+"="+move.Replace(e.Value))
	}
	return env
}

// server is a running argocd-cmp-server with the digestpin plugin, in the
// sidecar's environment: the plugin's files in its config folder, helm
// (the Helm v4 CLI, as in scripts/argocd/Dockerfile) and digestpin on its
// PATH, the folders of repo-server-patch.yaml under a test folder.
type server struct {
	configDir string // the plugin's files, as the sidecar mounts them
	home      string // /home/argocd
	cache     string // /var/cache, the cache volume
	tmp       string // /tmp, the sidecar's own
	seeds     string // the Secret digestpin-seed's volume
	socket    string // the plugin's unix socket
	bin       string // the folder with helm and digestpin
	path      string // PATH, with bin first
	log       *syncBuffer
}

// syncBuffer is a bytes.Buffer that a running process writes while a test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serverOptions are what a test changes of the sidecar.
type serverOptions struct {
	// seeds are the keys of the Secret digestpin-seed, mounted as the
	// kubelet mounts it (mode 0440: defaultMode 0400 under the pod's
	// fsGroup); nil for one new seed, key seed; empty for no Secret.
	seeds map[string]string
	// env holds more variables of the sidecar's env (NAME=value).
	env []string
}

// startServer starts argocd-cmp-server with the plugin's files from
// scripts/argocd/, and a new seed in its Secret volume, and stops it when
// the test ends. It points the repo server's side (this test process) at
// the server's socket folder, as the shared plugins volume does in the
// pod.
func startServer(t *testing.T) *server {
	t.Helper()
	return startServerWith(t, serverOptions{})
}

// seedText returns a new seed, as `digestpin seed` writes it.
func seedText(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "seed")
	if out, err := exec.Command(tool(t, "DIGESTPIN_TEST_BIN", "build"), "seed", p).CombinedOutput(); err != nil {
		t.Fatalf("digestpin seed: %v: %s", err, out)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// startServerWith is startServer with the sidecar changed as o says.
func startServerWith(t *testing.T, o serverOptions) *server {
	t.Helper()
	bin := tool(t, "DIGESTPIN_TEST_ARGOCD_CMP_SERVER", "argocd-cmp-server")
	helm := tool(t, "DIGESTPIN_TEST_HELM4", "helm")
	digestpin := tool(t, "DIGESTPIN_TEST_BIN", "build")

	root := t.TempDir()
	s := &server{
		configDir: filepath.Join(root, "config"),
		home:      filepath.Join(root, "home"),
		cache:     filepath.Join(root, "cache"),
		tmp:       filepath.Join(root, "tmp"),
		log:       &syncBuffer{},
	}
	// A unix socket's path is limited to 107 bytes: the socket folder is
	// a short one of its own.
	sockDir, err := os.MkdirTemp("", "cmp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	s.socket = filepath.Join(sockDir, pluginName+".sock")
	toolDir := filepath.Join(root, "bin")
	for _, d := range []string{s.configDir, filepath.Join(s.home, ".docker"), s.cache, s.tmp, toolDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"helm": helm, "digestpin": digestpin} {
		if err := os.Symlink(target, filepath.Join(toolDir, name)); err != nil {
			t.Fatal(err)
		}
	}

	// The ConfigMap's files, where the install mounts them: plugin.yaml
	// names them by their path in the sidecar, rewritten to this folder.
	testfiles.LayOutArgoCDPlugin(t, repoRoot(t), s.configDir)

	// The Secret digestpin-seed, where repo-server-patch.yaml mounts it
	// (DIGESTPIN_SEED_FILE in its env, moved below).
	seeds := o.seeds
	if seeds == nil {
		seeds = map[string]string{"seed": seedText(t)}
	}
	s.seeds = filepath.Join(s.home, "digestpin-seed")
	if err := os.MkdirAll(s.seeds, 0o755); err != nil {
		t.Fatal(err)
	}
	if len(seeds) > 0 {
		testfiles.SecretVolume(t, s.seeds, seeds, 0o440)
	}

	move := strings.NewReplacer("/home/argocd", s.home, "/var/cache", s.cache, "/tmp", s.tmp)
	s.bin = toolDir
	s.path = toolDir + string(os.PathListSeparator) + os.Getenv("PATH")
	env := append([]string{
		"PATH=" + s.path,
		"HOME=" + s.home,
		"TMPDIR=" + s.tmp,
		"ARGOCD_PLUGINSOCKFILEPATH=" + sockDir,
		"ARGOCD_CMP_WORKDIR=" + s.tmp,
	}, sidecarEnv(t, move)...)
	env = append(env, o.env...)

	cmd := exec.Command(bin, "--config-dir-path", s.configDir, "--logformat", "text")
	cmd.Env = env
	cmd.Dir = s.home
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting argocd-cmp-server: %v", err)
	}
	var waitErr error // set before exited is closed
	exited := make(chan struct{})
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
			if !t.Failed() {
				t.Errorf("argocd-cmp-server exited during the test: %v", waitErr)
			}
		default:
		}
		// The server traps SIGTERM to remove its socket but keeps
		// serving; the kubelet kills it after the grace period.
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("argocd-cmp-server log:\n%s", s.log.String())
		}
	})

	// Ready when the socket listens (its file is there a moment before:
	// a request in between was refused).
	deadline := time.Now().Add(30 * time.Second)
	for {
		if testfiles.Listening(s.socket) {
			break
		}
		select {
		case <-exited:
			t.Fatalf("argocd-cmp-server exited (%v):\n%s", waitErr, s.log.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("argocd-cmp-server did not listen on %s within 30s:\n%s", s.socket, s.log.String())
		}
	}
	t.Setenv(common.EnvPluginSockFilePath, sockDir)
	return s
}

// application is what the repo server knows of an Application when it
// asks the plugin for its manifests.
type application struct {
	name, namespace, project string
	repoURL, targetRevision  string
	revision                 string // the commit
	path                     string // spec.source.path
	kubeVersion              string // the destination cluster's
	apiVersions              []string
	plugin                   *v1alpha1.ApplicationSourcePlugin // spec.source.plugin

	// allowOutOfBoundsSymlinks is the repo server's setting
	// (reposerver.allow.oob.symlinks, default false): without it, the
	// repo server refuses a repository with a symbolic link that leaves
	// it before the plugin sees it.
	allowOutOfBoundsSymlinks bool
}

// shopApp is the Application of testdata/argocd-app, named shop and
// deployed to the namespace prod, with the plugin env given as NAME=value.
func shopApp(t *testing.T, env ...string) application {
	t.Helper()
	plugin := &v1alpha1.ApplicationSourcePlugin{Name: pluginName}
	for _, kv := range env {
		e, err := v1alpha1.NewEnvEntry(kv)
		if err != nil {
			t.Fatal(err)
		}
		plugin.Env = append(plugin.Env, e)
	}
	return application{
		name: "shop", namespace: "prod", project: "default",
		repoURL: "https://git.example.com/shop.git", targetRevision: "main",
		revision:    "0123456789abcdef0123456789abcdef01234567",
		path:        "web",
		kubeVersion: "v1.34.1",
		apiVersions: []string{"admissionregistration.k8s.io/v1", "apps/v1", "batch/v1", "batch/v1/CronJob", "v1"},
		plugin:      plugin,
	}
}

// env returns the environment the repo server sends with a manifest
// request: ARGOCD_APP_*, KUBE_VERSION and KUBE_API_VERSIONS, then the
// plugin's env and parameters (withPlugin), in the order Argo CD v3.3.0's
// repo server builds it (reposerver/repository: newEnv, getPluginEnvs).
func (a application) env() ([]string, error) {
	short := func(n int) string { return a.revision[:min(n, len(a.revision))] }
	env := v1alpha1.Env{
		{Name: "ARGOCD_APP_NAME", Value: a.name},
		{Name: "ARGOCD_APP_NAMESPACE", Value: a.namespace},
		{Name: "ARGOCD_APP_PROJECT_NAME", Value: a.project},
		{Name: "ARGOCD_APP_REVISION", Value: a.revision},
		{Name: "ARGOCD_APP_REVISION_SHORT", Value: short(7)},
		{Name: "ARGOCD_APP_REVISION_SHORT_8", Value: short(8)},
		{Name: "ARGOCD_APP_SOURCE_REPO_URL", Value: a.repoURL},
		{Name: "ARGOCD_APP_SOURCE_PATH", Value: a.path},
		{Name: "ARGOCD_APP_SOURCE_TARGET_REVISION", Value: a.targetRevision},
	}.Environ()
	env = append(env,
		"KUBE_VERSION="+strings.TrimPrefix(a.kubeVersion, "v"),
		"KUBE_API_VERSIONS="+strings.Join(a.apiVersions, ","))
	return a.withPlugin(env)
}

// withPlugin returns env followed by the plugin's env, each NAME as
// ARGOCD_ENV_NAME with $VAR references to env expanded, and the plugin's
// parameters (ARGOCD_APP_PARAMETERS, PARAM_*), as the repo server's
// getPluginParamEnvs does.
func (a application) withPlugin(env []string) ([]string, error) {
	if a.plugin == nil {
		return env, nil
	}
	var known v1alpha1.Env
	for _, kv := range env {
		e, err := v1alpha1.NewEnvEntry(kv)
		if err != nil {
			return nil, fmt.Errorf("parsing %q: %w", kv, err)
		}
		known = append(known, e)
	}
	out := slices.Clone(env)
	for _, e := range a.plugin.Env {
		out = append(out, "ARGOCD_ENV_"+e.Name+"="+known.Envsubst(e.Value))
	}
	params, err := a.plugin.Parameters.Environ()
	if err != nil {
		return nil, fmt.Errorf("plugin parameters: %w", err)
	}
	return append(out, params...), nil
}

// connect finds the Application's plugin as the repo server does
// (util/app/discovery: by the plugin's name when the Application gives
// one, else by asking every plugin's MatchRepository), with the repository
// at repo.
func (a application) connect(ctx context.Context, repo string, env []string) (utilio.Closer, apiclient.ConfigManagementPluginServiceClient, error) {
	name := ""
	if a.plugin != nil {
		name = a.plugin.Name
	}
	return discovery.DetectConfigManagementPlugin(ctx, filepath.Join(repo, a.path), repo, name, env, nil)
}

// generate asks the plugin for the Application's manifests, with the
// repository at repo, as the repo server does (runConfigManagementPluginSidecars
// and generateManifestsCMP in reposerver/repository): the manifests come
// back as JSON, one a document, which the repo server reads as objects.
// A failure's message is the one Argo CD puts in the Application's
// ComparisonError condition, after "failed to generate manifest for
// source 1 of 1: rpc error: code = Unknown desc = ".
func (a application) generate(t *testing.T, repo string) (manifests []string, objs []*unstructured.Unstructured, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), generateTimeout)
	defer cancel()
	env, err := a.env()
	if err != nil {
		t.Fatal(err)
	}
	if !a.allowOutOfBoundsSymlinks {
		if err := apppathutil.CheckOutOfBoundsSymlinks(repo); err != nil {
			var oob *apppathutil.OutOfBoundsSymlinkError
			if errors.As(err, &oob) {
				return nil, nil, fmt.Errorf("repository contains out-of-bounds symlinks. file: %s", oob.File)
			}
			return nil, nil, err
		}
	}
	conn, client, err := a.connect(ctx, repo, env)
	if err != nil {
		return nil, nil, err
	}
	defer utilio.Close(conn)
	if _, err := client.CheckPluginConfiguration(ctx, &emptypb.Empty{}); err != nil {
		return nil, nil, fmt.Errorf("error calling cmp-server checkPluginConfiguration: %w", err)
	}
	stream, err := client.GenerateManifest(ctx, grpc_retry.Disable())
	if err != nil {
		return nil, nil, fmt.Errorf("error getting generateManifestStream: %w", err)
	}
	if err := cmp.SendRepoStream(stream.Context(), filepath.Join(repo, a.path), repo, stream, env, nil); err != nil {
		return nil, nil, fmt.Errorf("error sending file to cmp-server: %w", err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, nil, fmt.Errorf("error generating manifests in cmp: %w", err)
	}
	for _, m := range resp.Manifests {
		o, err := kube.SplitYAML([]byte(m))
		if err != nil {
			return nil, nil, fmt.Errorf("failed to convert CMP manifests to unstructured objects: %w", err)
		}
		objs = append(objs, o...)
	}
	return resp.Manifests, objs, nil
}

// parameters asks the plugin for its parameter announcement, with the
// repository at repo, as the repo server does for the UI
// (populatePluginAppDetails in reposerver/repository): with the
// Application's name and source, and the plugin's env and parameters.
func (a application) parameters(t *testing.T, repo string) (*apiclient.ParametersAnnouncementResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), generateTimeout)
	defer cancel()
	env, err := a.withPlugin([]string{
		"ARGOCD_APP_NAME=" + a.name,
		"ARGOCD_APP_SOURCE_REPO_URL=" + a.repoURL,
		"ARGOCD_APP_SOURCE_PATH=" + a.path,
		"ARGOCD_APP_SOURCE_TARGET_REVISION=" + a.targetRevision,
	})
	if err != nil {
		t.Fatal(err)
	}
	conn, client, err := a.connect(ctx, repo, env)
	if err != nil {
		return nil, fmt.Errorf("failed to detect CMP for app: %w", err)
	}
	defer utilio.Close(conn)
	stream, err := client.GetParametersAnnouncement(ctx, grpc_retry.Disable())
	if err != nil {
		return nil, fmt.Errorf("error getting parametersAnnouncementStream: %w", err)
	}
	if err := cmp.SendRepoStream(stream.Context(), filepath.Join(repo, a.path), repo, stream, env, nil); err != nil {
		return nil, fmt.Errorf("error sending file to cmp-server: %w", err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, fmt.Errorf("failed to get parameter announcement: %w", err)
	}
	return resp, nil
}

// match asks the plugin's MatchRepository whether it would render the
// Application's source folder unasked (plugin discovery), with the
// repository at repo.
func match(t *testing.T, s *server, repo, path string) (*apiclient.RepositoryResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), generateTimeout)
	defer cancel()
	conn, client, err := apiclient.NewConfigManagementPluginClientSet(s.socket).NewConfigManagementPluginClient()
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", s.socket, err)
	}
	defer utilio.Close(conn)
	stream, err := client.MatchRepository(ctx, grpc_retry.Disable())
	if err != nil {
		return nil, fmt.Errorf("error getting stream client: %w", err)
	}
	if err := cmp.SendRepoStream(ctx, filepath.Join(repo, path), repo, stream, []string{"ARGOCD_APP_SOURCE_PATH=" + path}, nil); err != nil {
		return nil, fmt.Errorf("error sending stream: %w", err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, fmt.Errorf("error receiving stream response: %w", err)
	}
	return resp, nil
}
