//go:build !unix

package redistest

import "net"

func shrinkBacklog(net.Listener) error { return ErrUnsupported }
