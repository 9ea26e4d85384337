package main

import (
	"testing"

	"github.com/cocoonstack/vk-sandbox/internal/powercut"
)

// The instance id survives a power cut right after it was made: a host that
// lost it would be a new holder, refused for a lease duration after every
// crash that cut the power (the R1 crash suites restart a node that way).
func TestTheHolderIDSurvivesAPowerCut(t *testing.T) {
	backing := t.TempDir()
	fsys := powercut.Mount(t, backing)
	first, err := holderIdentity(fsys.Dir(), hostnameIs("host-a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.PowerCut(powercut.DropUnsynced); err != nil {
		t.Fatal(err)
	}
	fsys = powercut.Mount(t, backing)
	again, err := holderIdentity(fsys.Dir(), hostnameIs("host-a"))
	if err != nil || again != first {
		t.Fatalf("holder identity after a power cut = %q, %v; want %q, kept", again, err, first)
	}
}
