package testfiles

import "net"

// Listening reports whether a server accepts connections on the unix
// socket at path. The socket's file exists from the server's bind, a
// moment before it listens: a client that connects in between is refused,
// so a test that waits for a server's socket waits for this, not for the
// file.
func Listening(path string) bool {
	c, err := net.Dial("unix", path)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}
