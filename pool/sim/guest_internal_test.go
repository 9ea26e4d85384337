package sim

import (
	"sync"
	"testing"
)

// A command holds its share of the exec memory until it answers: the
// budget never goes below zero, however many take at once, and every give
// comes back.
func TestExecBudgetIsHeldAndGivenBack(t *testing.T) {
	var b execBudget
	b.left.Store(3)
	var wg sync.WaitGroup
	var mu sync.Mutex
	took := 0
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b.take(1) {
				mu.Lock()
				took++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if took != 3 || b.left.Load() != 0 {
		t.Fatalf("%d takes succeeded, %d left; want 3 and 0", took, b.left.Load())
	}
	if b.take(1) {
		t.Fatal("took from an empty budget")
	}
	b.give(1)
	if !b.take(1) {
		t.Fatal("a given-back share could not be taken")
	}
}
