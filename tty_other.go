//go:build !unix

package main

import "os"

// inBackground reports false: only Unix terminals stop a background reader.
func inBackground(*os.File) bool { return false }
