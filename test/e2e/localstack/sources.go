package localstack

import "fmt"

// Applications with more than one source (issue 30): the promoted release beside values kept in Git.

// MultiSourceApplicationYAML is an automated Argo CD Application in namespace with two sources,
// rendered together into namespace target: "app", the OCI artifact ociURL (path ., no revision
// yet: Stagecoach writes it), and "values", the folder valuesPath of the Git repository gitURL at
// valuesRevision. It carries the stagecoach.dev/stage label of stage, and retries a failed sync
// once after 1 s (Argo CD's default is 5 times with backoff: minutes before a failure shows).
func MultiSourceApplicationYAML(namespace, name, ociURL, gitURL, valuesPath, valuesRevision, stage, target string) string {
	return fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: %[2]s, namespace: %[1]s, labels: {stagecoach.dev/stage: %[7]s}}
spec:
  project: default
  sources:
  - {name: app, repoURL: %[3]s, path: ., targetRevision: ""}
  - {name: values, repoURL: %[4]s, path: %[5]s, targetRevision: %[6]q}
  destination: {server: https://kubernetes.default.svc, namespace: %[8]s}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
    retry: {limit: 1, backoff: {duration: 1s, factor: 1}}
`, namespace, name, ociURL, gitURL, valuesPath, valuesRevision, stage, target)
}
