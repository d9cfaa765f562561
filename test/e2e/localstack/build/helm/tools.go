//go:build tools

// Package helm pins the helm command's main package, so that `go mod tidy` records its graph.
package helm

import _ "helm.sh/helm/v4/cmd/helm"
