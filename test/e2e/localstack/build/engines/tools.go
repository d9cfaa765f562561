//go:build tools

// Package engines pins the main packages of the engines the stack runs (the Argo CD multi-call
// binary and the three Flux controllers), so that `go mod tidy` records one dependency graph for
// all of them: built by one go command, they compile their shared dependencies (Kubernetes,
// controller-runtime, gRPC, the cloud SDKs) once.
package engines

import (
	_ "github.com/argoproj/argo-cd/v3/cmd"
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/notification-controller"
	_ "github.com/fluxcd/source-controller"
)
