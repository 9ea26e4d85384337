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
