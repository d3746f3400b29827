//go:build !unix

package cli

import "os"

// readable reports whether this process may open path for reading.
func readable(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	_ = f.Close()
	return true
}
