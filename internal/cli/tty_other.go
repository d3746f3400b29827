//go:build !unix

package cli

import "os"

// inBackground reports false: only Unix terminals stop a background reader.
func inBackground(*os.File) bool { return false }
