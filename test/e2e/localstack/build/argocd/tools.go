//go:build tools

// Package argocd pins the Argo CD main package so that `go mod tidy` records its whole dependency graph.
package argocd

import _ "github.com/argoproj/argo-cd/v3/cmd"
