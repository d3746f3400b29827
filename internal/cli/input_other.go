//go:build !unix

package cli

import "errors"

// mapAnon has no anonymous mapping to give here: the input stays on the
// Go heap.
func mapAnon(int) ([]byte, error) { return nil, errors.ErrUnsupported }

// unmap is never called here: mapAnon maps nothing.
func unmap([]byte) {}
