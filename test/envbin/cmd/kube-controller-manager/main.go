// Command kube-controller-manager is Kubernetes' own controller manager, rebuilt from the Go module
// proxy for the end-to-end stack: the real deployment and replicaset controllers write the status
// that Stagecoach's completion rules read.
package main

import (
	"os"
	_ "time/tzdata" // the CronJob controller parses time zones

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
