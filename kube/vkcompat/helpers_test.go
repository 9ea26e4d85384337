package vkcompat

// The Pod contract's annotations (kube's Ann* constants), as kube hands
// them to this package.
const (
	annTemplate = "sandbox.cocoonstack.io/template"
	annClaimID  = "sandbox.cocoonstack.io/claim-id"
	annDeadline = "sandbox.cocoonstack.io/deadline"
	annPodUID   = "sandbox.cocoonstack.io/pod-uid"
)

var writtenBack = []string{annClaimID, annDeadline, annPodUID}
