package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolve"
)

// pin reads the stream, pins it and writes it to stdout in one write, only
// when everything succeeded.
func pin(ctx context.Context, o *options, stdin io.Reader, stdout io.Writer, rep *reporter) error {
	r, err := o.renderer(rep)
	if err != nil {
		return &usageError{err}
	}
	g, err := o.gitops.start(r, o.platform, rep)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	in, err := o.read(stdin)
	if err != nil {
		return err
	}
	res, err := r.Render(ctx, in)
	if err != nil {
		return err
	}
	if err := g.finish(res); err != nil {
		return err
	}
	if _, err := stdout.Write(res.Output); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// read returns the whole input stream.
func (o *options) read(stdin io.Reader) ([]byte, error) {
	if o.filename == "" || o.filename == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(o.filename)
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	return b, nil
}

// renderer builds the renderer and its resolver from the options.
func (o *options) renderer(rep *reporter) (*renderer.Renderer, error) {
	mode, err := renderer.ParseMode(o.mode)
	if err != nil {
		return nil, err
	}
	var keep bool
	switch o.onError {
	case "fail":
	case "keep":
		keep = true
	default:
		return nil, fmt.Errorf("parsing --on-error %q: want fail or keep", o.onError)
	}
	if o.checksumAnnotation == "" {
		return nil, fmt.Errorf("--checksum-annotation is empty")
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("--timeout must be positive, got %s", o.timeout)
	}
	paths := renderer.DefaultPodSpecPaths
	for _, s := range o.podSpecPaths {
		p, err := renderer.ParsePodSpecPath(s)
		if err != nil {
			return nil, err
		}
		paths = append(paths[:len(paths):len(paths)], p)
	}
	// Credentials: the pull secrets in the order given, then the docker
	// config with its credential helpers.
	var keychains []authn.Keychain
	for _, f := range o.pullSecrets {
		kc, err := resolve.ReadPullSecret(f)
		if err != nil {
			return nil, fmt.Errorf("--pull-secret: %w", err)
		}
		keychains = append(keychains, kc)
	}
	ropts := []resolve.Option{
		resolve.WithKeychain(authn.NewMultiKeychain(append(keychains, authn.DefaultKeychain)...)),
		resolve.WithJobs(o.concurrency),
		resolve.WithRequestTimeout(o.requestTimeout),
		resolve.WithInsecureRegistries(o.insecureRegistries...),
		resolve.WithCAFiles(o.caFiles...),
		resolve.WithMirrorOnly(o.mirrorOnly),
		resolve.WithUserAgent("digestpin/" + version),
		resolve.WithLogf(rep.debugf),
	}
	for _, m := range o.registryMirrors {
		from, to, ok := strings.Cut(m, "=")
		if !ok {
			return nil, fmt.Errorf("parsing --registry-mirror %q: want FROM=TO", m)
		}
		ropts = append(ropts, resolve.WithMirror(from, to))
	}
	if o.platform != "" {
		p, err := v1.ParsePlatform(o.platform)
		if err != nil {
			return nil, fmt.Errorf("parsing --platform %q: %w", o.platform, err)
		}
		ropts = append(ropts, resolve.WithPlatform(p))
	}
	res, err := resolve.New(ropts...)
	if err != nil {
		return nil, err
	}
	return &renderer.Renderer{
		Resolver:           res,
		Mode:               mode,
		ChecksumAnnotation: o.checksumAnnotation,
		PodSpecPaths:       paths,
		KeepUnresolved:     keep,
		Warnf:              rep.warnf,
	}, nil
}
