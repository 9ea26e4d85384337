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

func TestAddrRangeFirstFillsInnerOctetsWithZero(t *testing.T) {
	for prefix, want := range map[string]string{"10.": "10.0.0.1:7777", "10.77": "10.77.0.1:7777", "192.168.7.": "192.168.7.1:7777"} {
		ar, err := newAddrRange(prefix)
		if err != nil || ar.first() != want {
			t.Errorf("first(%q) = %q, %v; want %q", prefix, ar.first(), err, want)
		}
	}
}
