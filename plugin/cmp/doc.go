// Package cmp is Stagecoach's Argo CD config management plugin: it renders a Git-sourced app
// directory (plain YAML/JSON, Kustomize or a Helm chart, all in-process) at the digest Stagecoach
// promoted, pins the images the app declares to that digest, and annotates every object with the
// Stage and version. `stagecoach cmp generate` is its command; plugin/plugin.yaml registers it with
// argocd-cmp-server.
//
// Usage, as the command does it in the directory Argo CD runs it in:
//
//	dir, _ := os.Getwd()
//	err := cmp.Generate(ctx, cmp.Options{Dir: dir, Env: os.LookupEnv}, os.Stdout)
//
// Options.VerifyDigest, when set, is asked about "<repository>@<digest>" for every declared
// image before anything is rendered; an error refuses the render.
package cmp
