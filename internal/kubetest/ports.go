package kubetest

import (
	"fmt"
	"net"
	"strings"
)

// freePorts returns n distinct loopback ports that were free a moment ago.
// All listeners are held open until every port is chosen so the kernel
// cannot hand out the same port twice. Another process may still take one
// before the child binds it; startWithPortRetry covers that window.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// portRetries bounds how often a start is retried with fresh ports when a
// child lost the race for its port.
const portRetries = 5

// isAddrInUse reports whether a child's log says it could not bind.
func isAddrInUse(logTail string) bool {
	return strings.Contains(logTail, "address already in use")
}

// FreePort is a loopback port that was free a moment ago.
func FreePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}
