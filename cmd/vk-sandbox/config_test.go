package main

import "testing"

// Worker counts of 0 or less take their documented defaults, once, so that
// every consumer of the config (engine, gauges, idle pool) sees the same.
func TestWorkerCountsOfZeroOrLessTakeTheirDefaults(t *testing.T) {
	c, err := parseFlags([]string{"--shards=0", "--workers-per-shard=-1", "--vk-workers=0"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Shards != 8 || c.WorkersPerShard != 32 || c.VKWorkers != 64 {
		t.Fatalf("shards %d, workers per shard %d, vk workers %d; want 8, 32, 64", c.Shards, c.WorkersPerShard, c.VKWorkers)
	}
	c, err = parseFlags([]string{"--shards=2", "--workers-per-shard=4", "--vk-workers=16"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Shards != 2 || c.WorkersPerShard != 4 || c.VKWorkers != 16 {
		t.Fatalf("explicit counts changed: %d, %d, %d", c.Shards, c.WorkersPerShard, c.VKWorkers)
	}
}

// Every shard must have room for every Pod the node admits: the queue depth
// defaults to --node-pods, and a smaller one is refused at startup.
func TestQueueDepthIsCheckedAgainstNodePods(t *testing.T) {
	c, err := parseFlags([]string{"--node-pods=3000"})
	if err != nil {
		t.Fatal(err)
	}
	if c.QueueDepth != 3000 {
		t.Fatalf("queue depth %d, want --node-pods (3000)", c.QueueDepth)
	}
	if _, err := parseFlags([]string{"--node-pods=3000", "--queue-depth=1024"}); err == nil {
		t.Fatal("a queue depth below --node-pods was accepted")
	}
	if c, err := parseFlags([]string{"--node-pods=100", "--queue-depth=500"}); err != nil || c.QueueDepth != 500 {
		t.Fatalf("queue depth above --node-pods: %v, %v", c, err)
	}
}

// A timeout of zero would make every sandboxd call fail at once.
func TestSandboxdTimeoutsMustBePositive(t *testing.T) {
	for _, arg := range []string{"--sandboxd-timeout=0s", "--sandboxd-claim-timeout=-1s"} {
		if _, err := parseFlags([]string{arg}); err == nil {
			t.Errorf("%s was accepted", arg)
		}
	}
}
