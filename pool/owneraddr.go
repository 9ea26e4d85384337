package pool

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// ownerHost is the host part of an owner_addr, in each form a node may
// answer with: "10.0.0.5:7777", "[fd00::5]:7777", a bare host, or a full
// origin such as "https://sbx.example:8443". An empty or unparsable value
// gives "". The host may be a name rather than an IP: see OwnerIP.
func ownerHost(addr string) string {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return ""
	}
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			return ""
		}
		return u.Hostname()
	}
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return strings.Trim(addr, "[]")
}

// OwnerIP is the host of owner_addr when that host is an IP address, and
// false otherwise (absent, a hostname, or garbage). Only an IP may become a
// Pod IP.
func OwnerIP(addr string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(ownerHost(addr))
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}
