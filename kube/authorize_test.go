package kube

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

var sandboxes = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1alpha1", Resource: "sandboxes"}

func ownedPod(ownerUID string) *corev1.Pod {
	yes := true
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "agents.x-k8s.io/v1alpha1", Kind: "Sandbox", Name: "box", UID: "u1", Controller: &yes,
	}}}}
}

func owner(uid string, deleting bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("agents.x-k8s.io/v1alpha1")
	u.SetKind("Sandbox")
	u.SetNamespace("ns")
	u.SetName("box")
	u.SetUID("u1")
	if uid != "" {
		u.SetUID(typesUID(uid))
	}
	if deleting {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
	}
	return u
}

// fakeDyn files objects under the real resource name: the fake's own
// guess would be the naive plural "sandboxs".
func fakeDyn(objs ...*unstructured.Unstructured) *dynamicfake.FakeDynamicClient {
	d := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{sandboxes: "SandboxList"})
	for _, o := range objs {
		if err := d.Tracker().Create(sandboxes, o, o.GetNamespace()); err != nil {
			panic(err)
		}
	}
	return d
}

// The rows of the delete authorization table (docs/pod-contract.md) that a
// Pod's own ownerReference reaches; TestRecordedOwnerIsAskedWithTheDeleteTable
// has those of a claim's recorded owner (owner-unnamed, owner-unknown).
func TestDeleteAuthorizationTable(t *testing.T) {
	ctx := context.Background()
	check := func(name string, a *Authorizer, pod *corev1.Pod, release bool, reason string) {
		t.Helper()
		v := a.authorize(ctx, pod)
		if v.Release != release || v.Reason != reason {
			t.Errorf("%s: verdict %+v, want release=%v reason=%s", name, v, release, reason)
		}
	}
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	check("bare pod", &Authorizer{Dynamic: fakeDyn()}, bare, true, reasonBarePod)
	check("owner NotFound by name", &Authorizer{Dynamic: fakeDyn()}, ownedPod("u1"), true, ReasonOwnerGone)
	check("owner deleting", &Authorizer{Dynamic: fakeDyn(owner("", true))}, ownedPod("u1"), true, reasonOwnerDeleting)
	check("owner rotated", &Authorizer{Dynamic: fakeDyn(owner("u2", false))}, ownedPod("u1"), true, reasonOwnerRotated)
	check("owner alive", &Authorizer{Dynamic: fakeDyn(owner("", false))}, ownedPod("u1"), false, ReasonOwnerAlive)

	unnamed := fakeDyn()
	unnamed.PrependReactor("get", "sandboxes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{}, "") // a 404 of an unknown endpoint
	})
	check("404 without the name", &Authorizer{Dynamic: unnamed}, ownedPod("u1"), false, reasonOwnerUnverified)

	failing := fakeDyn()
	failing.PrependReactor("get", "sandboxes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	check("any other error", &Authorizer{Dynamic: failing}, ownedPod("u1"), false, ReasonOwnerGetError)
	check("no dynamic client", &Authorizer{}, ownedPod("u1"), false, reasonNoDynamic)
}

// The recorded owner is asked, never a Pod's ownerReference: a row records
// "apiVersion/kind/name" and the owner's UID, and the same table applies.
func TestRecordedOwnerIsAskedWithTheDeleteTable(t *testing.T) {
	ctx := context.Background()
	rec := pipeline.ClaimView{ID: "sb_1", OwnerUID: "u1", Owner: "agents.x-k8s.io/v1alpha1/Sandbox/box"}
	for _, tc := range []struct {
		name    string
		objs    []*unstructured.Unstructured
		c       pipeline.ClaimView
		release bool
		reason  string
	}{
		{"alive", []*unstructured.Unstructured{owner("", false)}, rec, false, ReasonOwnerAlive},
		{"gone", nil, rec, true, ReasonOwnerGone},
		{"deleting", []*unstructured.Unstructured{owner("", true)}, rec, true, reasonOwnerDeleting},
		{"rotated", []*unstructured.Unstructured{owner("u2", false)}, rec, true, reasonOwnerRotated},
		{"bare row", nil, pipeline.ClaimView{ID: "sb_1"}, true, reasonBarePod},
		{"unknown owner", nil, pipeline.ClaimView{ID: "sb_1", Owner: store.OwnerUnknown}, false, "owner-unknown"},
		{"uid without a name", nil, pipeline.ClaimView{ID: "sb_1", OwnerUID: "u1"}, false, reasonOwnerUnnamed},
	} {
		a := &Authorizer{Dynamic: fakeDyn(tc.objs...)}
		v := a.recordedOwner(ctx, "ns/p", tc.c)
		if v.Release != tc.release || v.Reason != tc.reason {
			t.Errorf("%s: verdict %+v, want release=%v reason %s", tc.name, v, tc.release, tc.reason)
		}
	}
	if o, ok := ownerRefOf(rec); !ok || ownerString(o) != rec.Owner || o.UID != "u1" {
		t.Errorf("ownerRefOf/ownerString do not round-trip: %+v", o)
	}
}

// The owner's resource comes from the apiserver's discovery, not from a
// plural guessed by English rules: a kind with an irregular plural is
// still found (a wrong guess 404s, and the VM would stay until its lease),
// and a kind discovery does not serve proves nothing about the owner.
func TestOwnerResourceComesFromDiscovery(t *testing.T) {
	ctx := context.Background()
	octopi := schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1alpha1", Resource: "octopodes"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.AddSpecific(octopi.GroupVersion().WithKind("Octopus"), octopi, octopi.GroupVersion().WithResource("octopus"), meta.RESTScopeNamespace)
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "agents.x-k8s.io/v1alpha1", "kind": "Octopus",
		"metadata": map[string]any{"name": "ink", "namespace": "ns", "uid": "u1"}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{octopi: "OctopusList"})
	if err := dyn.Tracker().Create(octopi, o, "ns"); err != nil {
		t.Fatal(err)
	}
	rec := pipeline.ClaimView{ID: "sb_1", OwnerUID: "u1", Owner: "agents.x-k8s.io/v1alpha1/Octopus/ink"}
	if v := (&Authorizer{Dynamic: dyn, Mapper: mapper}).recordedOwner(ctx, "ns/p", rec); v.Reason != ReasonOwnerAlive {
		t.Fatalf("an owner of an irregular plural: %+v, want %s (found through discovery)", v, ReasonOwnerAlive)
	}
	if plural("Octopus") == octopi.Resource {
		t.Fatal("the test needs a plural the English rules get wrong")
	}
	rec.Owner = "agents.x-k8s.io/v1alpha1/Squid/ink"
	if v := (&Authorizer{Dynamic: dyn, Mapper: mapper}).recordedOwner(ctx, "ns/p", rec); v.Release || v.Reason != reasonOwnerUnverified {
		t.Fatalf("a kind discovery does not serve: %+v, want preserve %s", v, reasonOwnerUnverified)
	}
}
