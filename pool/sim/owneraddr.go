package sim

import (
	"fmt"
	"strconv"
	"strings"
)

const (
	ownerPort = "7777"
	// The origin and hostname forms use the .example names reserved for
	// documentation: like the private IPs, they are never dialed.
	defaultOriginAddr   = "https://sandboxd-sim.example:8443"
	defaultHostnameAddr = "sandboxd-sim.example:7777"
)

// nodeOwnerAddr is the owner_addr every claim of the node carries (and
// advertise_addr): "" in the none and per-claim modes, where the node
// advertises no single address.
func nodeOwnerAddr(c Config, ar addrRange) (string, error) {
	switch c.OwnerAddrMode {
	case OwnerAddrNone, ownerAddrPerClaim:
		if c.OwnerAddr != "" {
			return "", fmt.Errorf("sim: OwnerAddr %q contradicts OwnerAddrMode %q", c.OwnerAddr, c.OwnerAddrMode)
		}
		return "", nil
	case OwnerAddrIP, OwnerAddrOrigin, OwnerAddrHostname:
	default:
		return "", fmt.Errorf("sim: OwnerAddrMode %q: want %s, %s, %s, %s or %s", c.OwnerAddrMode,
			OwnerAddrIP, OwnerAddrOrigin, OwnerAddrHostname, OwnerAddrNone, ownerAddrPerClaim)
	}
	if c.OwnerAddr != "" {
		return c.OwnerAddr, nil
	}
	switch c.OwnerAddrMode {
	case OwnerAddrOrigin:
		return defaultOriginAddr, nil
	case OwnerAddrHostname:
		return defaultHostnameAddr, nil
	}
	return ar.first(), nil
}

// addrRange hands out owner_addr values from a prefix: the prefix's octets,
// then the remaining ones counted from 1 to 254 each. Per-claim mode takes
// a fresh one per claim, skipping addresses in use; the node-wide ip mode
// uses the first.
type addrRange struct {
	prefix string
	free   int // octets to fill
	seq    uint64
}

func newAddrRange(prefix string) (addrRange, error) {
	if !strings.HasSuffix(prefix, ".") {
		prefix += "."
	}
	free := 4 - strings.Count(prefix, ".")
	if free < 1 || free > 3 {
		return addrRange{}, fmt.Errorf("sim: address prefix %q: want 1 to 3 leading octets", prefix)
	}
	return addrRange{prefix: prefix, free: free}, nil
}

// first is the range's lowest host address, e.g. 10.77.0.1:7777: inner
// octets 0, the last 1.
func (a *addrRange) first() string {
	octets := make([]string, a.free)
	for i := range octets {
		octets[i] = "0"
	}
	octets[a.free-1] = "1"
	return a.prefix + strings.Join(octets, ".") + ":" + ownerPort
}

func (a *addrRange) size() uint64 {
	n := uint64(1)
	for range a.free {
		n *= 254
	}
	return n
}

func (a *addrRange) next(inUse func(string) bool) (string, error) {
	for range a.size() {
		n := a.seq % a.size()
		a.seq++
		octets := make([]string, a.free)
		for i := a.free - 1; i >= 0; i-- {
			octets[i] = strconv.FormatUint(n%254+1, 10)
			n /= 254
		}
		addr := a.prefix + strings.Join(octets, ".") + ":" + ownerPort
		if !inUse(addr) {
			return addr, nil
		}
	}
	return "", fmt.Errorf("owner address range %s* exhausted", a.prefix)
}
