// Command kubectl is Kubernetes' own kubectl, rebuilt from the Go module proxy so that tests can
// run `kubectl get` and `kubectl wait` exactly as users do.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
