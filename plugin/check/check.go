// Package check is the SDK for Stagecoach check plugins: programs, run by the controller through
// hashicorp/go-plugin, that decide whether a version may be applied (pre-apply) or counts as
// verified (post-apply). A plugin's main calls Serve with its Checker; the controller dispenses
// the same Checker interface on its side. The wire protocol is described in PROTOCOL.md.
package check

import (
	"context"

	"github.com/hashicorp/go-plugin"
)

// Handshake values. The cookie only tells a binary it was started by Stagecoach (go-plugin calls
// it "a UX feature, not a security measure"); it must never change, or every plugin built
// against an older SDK stops starting.
const (
	MagicCookieKey   = "STAGECOACH_CHECK_PLUGIN"
	MagicCookieValue = "b0ebcce0-9fa8-4701-a367-6712c698601f"
)

// ProtocolVersion is the version of the check protocol this SDK speaks; go-plugin negotiates it
// (the highest version both sides offer) through VersionedPlugins.
const ProtocolVersion = 1

// PluginName is the name the check plugin is served and dispensed under.
const PluginName = "check"

// Phase says when a check runs.
type Phase string

const (
	// PhasePreApply: before the version is written to the applier (spec.promotion.checks).
	PhasePreApply Phase = "pre-apply"
	// PhasePostApply: after the version landed, before it counts as verified
	// (spec.verification.checks).
	PhasePostApply Phase = "post-apply"
)

// Request is what a plugin is asked to check: one version of one Stage.
type Request struct {
	// Stage is the Stage's name and Namespace its namespace.
	Stage     string `json:"stage"`
	Namespace string `json:"namespace"`
	// Environment and Service are the Stage's spec.environment and spec.service.
	Environment string `json:"environment"`
	Service     string `json:"service"`
	// Version is the version's tag, Digest its digest (sha256:...).
	Version string `json:"version"`
	Digest  string `json:"digest"`
	// Phase is pre-apply or post-apply.
	Phase Phase `json:"phase"`
	// Config is the check's spec.plugin.config, as is.
	Config map[string]string `json:"config,omitempty"`
}

// Result is a plugin's verdict. A check that could not be carried out returns an error instead;
// the controller reports both as a failed check, and retries either.
type Result struct {
	Passed bool `json:"passed"`
	// Message says why, for people: it ends up in the Stage's status.
	Message string `json:"message"`
}

// Checker is what a check plugin implements, and what the controller calls.
type Checker interface {
	Check(ctx context.Context, req Request) (Result, error)
}

// HandshakeConfig returns the handshake both sides must use.
func HandshakeConfig() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{MagicCookieKey: MagicCookieKey, MagicCookieValue: MagicCookieValue}
}

// PluginSets returns the versioned plugin sets: impl is served on the plugin side and nil on the
// controller side (it only dispenses).
func PluginSets(impl Checker) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		ProtocolVersion: {PluginName: &GRPCPlugin{Impl: impl}},
	}
}

// Serve runs impl as a check plugin; call it from main. It returns when the controller is done
// with the plugin. Run by hand (without the controller), it prints that it is a plugin and exits.
func Serve(impl Checker) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  HandshakeConfig(),
		VersionedPlugins: PluginSets(impl),
		GRPCServer:       plugin.DefaultGRPCServer,
	})
}
