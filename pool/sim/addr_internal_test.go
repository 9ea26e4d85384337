package sim

import "testing"

func TestAddrRangeSkipsAddressesInUseAndReportsExhaustion(t *testing.T) {
	ar, err := newAddrRange("10.1.2.")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{"10.1.2.1:7777": true}
	first, err := ar.next(func(a string) bool { return used[a] })
	if err != nil || first != "10.1.2.2:7777" {
		t.Fatalf("next = %q, %v; want 10.1.2.2:7777", first, err)
	}
	if _, err := ar.next(func(string) bool { return true }); err == nil {
		t.Error("a full range must be an error, not a loop or a duplicate")
	}
}
