package main

import (
	"fmt"
	"net"
	"net/netip"
)

// Values of --pod-ip-fallback besides an IP.
const (
	podIPFallbackAuto = "auto"
	podIPFallbackOff  = "off"
)

// podIPFallback is the Pod IP of a claim whose owner_addr carries no IP
// (sandboxd omits it when it advertises no routable host, or names a
// host): a Running Pod without a podIP leaves the operator's Sandbox
// NotReady for good. "auto" takes --node-ip, else the advertise_addr that
// sandboxd reports when it is an IP (see probeSandboxd), else this host's
// primary address; an IP is used as given; "off" leaves such Pods without
// a podIP. fixed reports whether probeSandboxd may not replace it.
func podIPFallback(flag, nodeIP string, hostAddrs func() ([]net.Addr, error)) (ip netip.Addr, fixed bool, err error) {
	switch flag {
	case podIPFallbackOff:
		return netip.Addr{}, true, nil
	case podIPFallbackAuto, "":
		if ip, err := netip.ParseAddr(nodeIP); err == nil {
			return ip, true, nil
		}
		return primaryAddr(hostAddrs), false, nil
	}
	ip, err = netip.ParseAddr(flag)
	if err != nil || !ip.IsGlobalUnicast() && !ip.IsPrivate() {
		return netip.Addr{}, false, fmt.Errorf("--pod-ip-fallback %q: want auto, off or a unicast IP", flag)
	}
	return ip, true, nil
}

// primaryAddr is the host's first global unicast interface address, IPv4
// before IPv6; invalid when it has none. It reads the interfaces only: no
// packet is sent.
func primaryAddr(hostAddrs func() ([]net.Addr, error)) netip.Addr {
	addrs, err := hostAddrs()
	if err != nil {
		return netip.Addr{}
	}
	var v6 netip.Addr
	for _, a := range addrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil || !pfx.Addr().IsGlobalUnicast() {
			continue
		}
		if ip := pfx.Addr().Unmap(); ip.Is4() {
			return ip
		} else if !v6.IsValid() {
			v6 = ip
		}
	}
	return v6
}
