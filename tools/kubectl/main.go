// Command kubectl is kubectl itself (k8s.io/kubectl's command tree, as
// k8s.io/kubernetes/cmd/kubectl builds it), pinned at the release of the
// rest of k8s.io, for the tests that drive kubectl exec, cp and -it
// against a virtual node (e2e/kubectl_cli_test.go). It is built by
// scripts/build-tools.sh (tool kubectl, module tools/kubectl).
//
// kubectl has no --version flag; build-tools.sh checks every cached
// binary with one, so it is taken here as `kubectl version --client`.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		os.Args = []string{os.Args[0], "version", "--client"}
	}
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
