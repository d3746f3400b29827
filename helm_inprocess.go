//go:build !nohelm

package main

import (
	"context"
	"io"
)

// runHelm runs digestpin template, install or upgrade (name) in this
// process: this is the full build, which links Helm's engine. The build
// with -tags nohelm runs digestpin-helm instead (helmexec.go).
func runHelm(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	if name == "template" {
		return runTemplate(ctx, args, stdout, stderr)
	}
	return runDeploy(ctx, name, args, stdout, stderr, helmConfiguration)
}

// forwardHelm hands nothing on in the full build: every command runs
// in this process.
func forwardHelm([]string, bool) (bool, error) { return false, nil }
