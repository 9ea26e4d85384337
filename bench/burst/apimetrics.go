package main

import "github.com/cocoonstack/vk-sandbox/bench/podload"

// The apiserver's request counts, shared with bench/fleet: apiRequests is
// apiserver_request_total keyed "VERB resource[/subresource] code",
// requestDelta the nonzero after - before, topRequests the largest entries.
var (
	apiRequests  = podload.APIRequests
	requestDelta = podload.Delta
	topRequests  = podload.Top
)
