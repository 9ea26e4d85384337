package main

import (
	"net"
	"net/netip"
	"testing"
)

// A Running Pod needs a podIP, or the operator's Sandbox stays NotReady:
// by default the fallback is --node-ip, else the host's primary address;
// "off" is the only way to have none.
func TestPodIPFallbackDefaultsToTheNodesOwnAddress(t *testing.T) {
	host := func() ([]net.Addr, error) {
		return []net.Addr{
			&net.IPNet{IP: net.ParseIP("127.0.0.1"), Mask: net.CIDRMask(8, 32)},
			&net.IPNet{IP: net.ParseIP("fd00::5"), Mask: net.CIDRMask(64, 128)},
			&net.IPNet{IP: net.ParseIP("10.1.2.3"), Mask: net.CIDRMask(24, 32)},
		}, nil
	}
	for _, tc := range []struct {
		flag, nodeIP, want string
		fixed              bool
	}{
		{"auto", "", "10.1.2.3", false},
		{"", "", "10.1.2.3", false},
		{"auto", "192.168.7.7", "192.168.7.7", true},
		{"10.9.9.9", "192.168.7.7", "10.9.9.9", true},
		{"off", "192.168.7.7", "invalid IP", true},
	} {
		ip, fixed, err := podIPFallback(tc.flag, tc.nodeIP, host)
		if err != nil || ip.String() != tc.want || fixed != tc.fixed {
			t.Errorf("podIPFallback(%q, %q) = %v, %v, %v; want %s, %v", tc.flag, tc.nodeIP, ip, fixed, err, tc.want, tc.fixed)
		}
	}
	if _, _, err := podIPFallback("not-an-ip", "", host); err == nil {
		t.Error("a malformed --pod-ip-fallback was accepted")
	}
	if ip := primaryAddr(func() ([]net.Addr, error) {
		return []net.Addr{&net.IPNet{IP: net.ParseIP("fd00::5"), Mask: net.CIDRMask(64, 128)}}, nil
	}); ip != netip.MustParseAddr("fd00::5") {
		t.Errorf("an IPv6-only host's primary address = %v", ip)
	}
}
