package kube

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

const restoreRoot = "root-tok-restore-test"

// restoreNode is one life of a node: a real engine over the emulator and
// the state file, with this package's provider on top. Stopping it is
// what a process exit leaves behind: the state file and the VMs.
type restoreNode struct {
	prov    *Provider
	eng     *pipeline.Engine
	st      *store.Store
	events  *record.FakeRecorder
	running chan *corev1.Pod // the provider's Running pushes
	stop    func()
}

func startRestoreNode(t *testing.T, sbx *pool.Client, path string, auth *Authorizer) *restoreNode {
	t.Helper()
	st, err := store.Open(path, store.Options{UnsafeNoFsync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	key, err := st.NodeKey()
	if err != nil {
		t.Fatalf("NodeKey: %v", err)
	}
	n := &restoreNode{st: st, events: record.NewFakeRecorder(64), running: make(chan *corev1.Pod, 8)}
	n.prov, err = newProvider(ProviderOptions{Authorizer: auth, Events: n.events, Log: slog.New(slog.DiscardHandler)},
		func(rep pipeline.Reporter) (claimEngine, error) {
			n.eng, err = pipeline.New(pipeline.Config{
				Node: "restore-node", NodeKey: key, Shards: 1, Workers: 2,
				Sandboxd: sbx, Store: st, Reporter: rep, Owners: auth.recordedOwner,
				Logger: slog.New(slog.DiscardHandler), VerifyInterval: 50 * time.Millisecond,
			})
			return n.eng, err
		})
	if err != nil {
		t.Fatalf("newProvider: %v", err)
	}
	n.prov.NotifyPods(context.Background(), func(p *corev1.Pod) {
		if p.Status.Phase == corev1.PodRunning {
			n.running <- p
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); n.eng.Run(ctx) }()
	stopped := false
	n.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-ran
		if err := st.Close(); err != nil {
			t.Errorf("store.Close: %v", err)
		}
	}
	t.Cleanup(n.stop)
	return n
}

// eventWith returns the first recorded Event that contains every part.
func (n *restoreNode) eventWith(parts ...string) (string, bool) {
	for {
		select {
		case e := <-n.events.Events:
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(e, p)
			}
			if ok {
				return e, true
			}
		default:
			return "", false
		}
	}
}

// TestRestoredStubDeleteFollowsTheOwner: a Pod that was Running when its
// node stopped is deleted while the node is down, so the next process never
// sees it in the apiserver. Restore puts a stub in memory from the state
// file row, and the delete virtual-kubelet then makes for it (a Pod the
// provider serves that the apiserver no longer has) is authorized by the
// owner the row recorded, as the original Pod's delete would have been:
//   - owner alive: the VM and its row are preserved for a replacement;
//   - owner deleted while the node was down too: the VM is released at
//     sandboxd and the row forgotten.
func TestRestoredStubDeleteFollowsTheOwner(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ownerGone bool
	}{
		{"owner-alive-preserves", false},
		{"owner-gone-releases", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emu := simtest.Start(t, sim.Config{RootToken: restoreRoot, Pools: map[pool.Key]int{{Template: "default"}: 2}, ColdLatency: -1})
			sbx := emu.Client(t, pool.ClientOptions{Token: restoreRoot})
			dyn := fakeDyn(owner("", false))
			auth := &Authorizer{Dynamic: dyn}
			path := filepath.Join(t.TempDir(), "state", "claims.json")

			// First life: the owned Pod runs.
			first := startRestoreNode(t, sbx, path, auth)
			pod := ownedPod("u1")
			pod.UID = "pod-uid-1"
			pod.Annotations = map[string]string{AnnTemplate: "default"}
			if err := first.prov.CreatePod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			var id string
			select {
			case p := <-first.running:
				id = p.Annotations[AnnClaimID]
			case <-time.After(20 * time.Second):
				t.Fatal("the Pod did not go Running")
			}
			first.stop()

			// While the node is down: the Pod is deleted (the next process
			// will not find it), and maybe its owner with it.
			if tc.ownerGone {
				if err := dyn.Tracker().Delete(sandboxes, "ns", "box"); err != nil {
					t.Fatal(err)
				}
			}

			// Second life: the stub comes from the row, with the Pod's UID and
			// the recorded owner.
			second := startRestoreNode(t, sbx, path, auth)
			if n := second.prov.restore(second.eng.Range); n != 1 {
				t.Fatalf("Restore restored %d rows, want 1", n)
			}
			stubs, _ := second.prov.GetPods(context.Background())
			if len(stubs) != 1 {
				t.Fatalf("the provider serves %d Pods after Restore, want the one stub", len(stubs))
			}
			stub := stubs[0]
			if stub.Namespace != "ns" || stub.Name != "p" || stub.UID != pod.UID || stub.Annotations[AnnClaimID] != id {
				t.Fatalf("stub %s/%s uid %s claim %q, want ns/p uid %s claim %s", stub.Namespace, stub.Name, stub.UID, stub.Annotations[AnnClaimID], pod.UID, id)
			}
			if o := metav1.GetControllerOf(stub); o == nil || o.UID != "u1" || o.Name != "box" || o.Kind != "Sandbox" {
				t.Fatalf("stub controller %+v, want the recorded owner Sandbox box (u1)", o)
			}

			if err := second.prov.DeletePod(context.Background(), stub); err != nil {
				t.Fatalf("DeletePod(stub): %v", err)
			}
			if left, _ := second.prov.GetPods(context.Background()); len(left) != 0 {
				t.Errorf("the provider still serves %d Pods after the delete", len(left))
			}
			live := emu.Sim.Sandboxes()
			cv, held := second.eng.Lookup("ns/p")
			if !tc.ownerGone {
				if len(live) != 1 || live[0].ID != id {
					t.Fatalf("live VMs %v, want the preserved %s", live, id)
				}
				row, _ := second.st.Get("ns/p")
				if !held || cv.ID != id || row.Token != live[0].Token {
					t.Fatalf("row for ns/p: held %v claim %q, want %s and its release credential kept for a replacement", held, cv.ID, id)
				}
				if r := emu.Sim.Counters()["release"]; r != 0 {
					t.Fatalf("%d release calls for a Pod whose owner lives", r)
				}
				if e, ok := second.eventWith(eventPreserved, ReasonOwnerAlive); !ok {
					t.Errorf("no %s Event naming %s (got %q)", eventPreserved, ReasonOwnerAlive, e)
				}
				return
			}
			if len(live) != 0 {
				t.Fatalf("live VMs %v after the owner-gone delete, want none", live)
			}
			if r := emu.Sim.Counters()["release_ok"]; r != 1 {
				t.Fatalf("release_ok = %d, want 1", r)
			}
			if held {
				t.Fatalf("row for ns/p (claim %s) survived its release", cv.ID)
			}
			if e, ok := second.eventWith(eventReleased, ReasonOwnerGone); !ok {
				t.Errorf("no %s Event naming %s (got %q)", eventReleased, ReasonOwnerGone, e)
			}
		})
	}
}
