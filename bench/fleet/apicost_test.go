package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Each node's requests come from its own FlowSchema; LISTs are counted
// from the verbs; watches are the open ones gained.
func TestWindowSplitsRequestsByNodeAndCountsLists(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := apiSnap{at: t0,
		byFlow:  map[string]float64{flowSchemaFor(0): 10, flowSchemaFor(1): 20, "exempt": 5},
		byVerb:  map[string]float64{"PUT leases": 4, "LIST pods": 1},
		watches: map[string]float64{"pods": 1, "nodes": 2}}
	b := apiSnap{at: t0.Add(10 * time.Second),
		byFlow:  map[string]float64{flowSchemaFor(0): 11, flowSchemaFor(1): 23, "exempt": 500},
		byVerb:  map[string]float64{"PUT leases": 8, "LIST pods": 3, "LIST leases": 1},
		watches: map[string]float64{"pods": 3, "nodes": 2}}
	w := window(a, b, []*node{{name: nodeName(0)}, {name: nodeName(1)}})
	if w.PerNode[nodeName(0)] != 1 || w.PerNode[nodeName(1)] != 3 || len(w.PerNode) != 2 {
		t.Errorf("per node = %v, want 1 and 3 (the harness's exempt requests are no node's)", w.PerNode)
	}
	if w.PerNodeRate.Min != 0.1 || w.PerNodeRate.Max != 0.3 || w.PerNodeRate.Mean != 0.2 {
		t.Errorf("rates = %+v", w.PerNodeRate)
	}
	if w.Lists != 3 || w.ByVerb["PUT leases"] != 4 {
		t.Errorf("lists = %d, by verb %v", w.Lists, w.ByVerb)
	}
	if d := watchDelta(a, b); len(d) != 1 || d["pods"] != 2 {
		t.Errorf("watch delta = %v, want pods 2", d)
	}
}

// The creates go round robin across the nodes, so each fills from the
// first second.
func TestInterleave(t *testing.T) {
	pod := func(ns string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns}} }
	got := interleave([][]*corev1.Pod{{pod("a"), pod("a")}, {pod("b"), pod("b")}})
	var order string
	for _, p := range got {
		order += p.Namespace
	}
	if order != "abab" {
		t.Errorf("order %q, want abab", order)
	}
}
