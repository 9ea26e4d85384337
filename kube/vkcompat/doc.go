// Package vkcompat is where vk-sandbox compensates for behaviours of
// virtual-kubelet, the library its node is built on. Every workaround here
// was checked against virtual-kubelet v1.14.1.
//
// Each file holds one workaround (or a few that share one type), and its
// file comment names the virtual-kubelet behaviour it compensates for and
// the tests that pin it:
//
//   - podcache.go: the Pod cache's generation stamp (PodCacheTransform);
//   - generation.go: the order of two generations of one name
//     (NewerGeneration);
//   - podinformer.go and echo.go: the Pod informer's handler, which drops
//     the echo of the provider's own write, hands an update to another UID
//     over as a delete and an add, and unwraps a delete learned from a
//     relist (EchoFilteredPods);
//   - statuswrite.go: the status write that does not decode its answer
//     (UndecodedStatusPods);
//   - retry.go: status and final-delete queues that do not give up
//     (RetryWhileThePodExists);
//   - ratelimit.go: the queues' rate limiters, replaced and metered
//     (ReplaceRateLimiters);
//   - portforward.go: port-forward's idle and creation timeouts, which
//     api.PodHandler swaps (PortForward);
//   - events.go: virtual-kubelet's empty ProviderCreateSuccess Event
//     dropped (QuietRecorder), and the Event budget (Budgeted), which
//     compensates for client-go's broadcaster rather than virtual-kubelet.
//
// Package kube wires them: this package does not import it, and takes the
// annotation names and the metrics it needs as arguments.
//
// docs/virtual-kubelet.md is the checklist for a virtual-kubelet upgrade:
// for each workaround, here and in kube, the functions to diff between the
// two versions, where it lives and the tests that pin it.
package vkcompat
