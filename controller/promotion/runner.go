// Package promotion moves a Stage's Promotions: the queue, automation, admission and the gate
// chain, apply, the engine's proof, verification, finish and rollback (run.go walks them in
// order). It is the only writer of Promotion status (status.go). It knows nothing of how the
// Stage's applier was judged: controller/stage hands it the applier object, a Rollout and a
// function that writes the Stage's status, and this package cannot import that one.
package promotion

import (
	"context"
	"net/http"
	"sync"

	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stagecoach-dev/stagecoach/controller/chart"
	"github.com/stagecoach-dev/stagecoach/internal/attest"
	"github.com/stagecoach-dev/stagecoach/internal/authz"
	"github.com/stagecoach-dev/stagecoach/internal/forge"
	"github.com/stagecoach-dev/stagecoach/internal/gitwrite"
	gitsource "github.com/stagecoach-dev/stagecoach/internal/source/git"
	recordsource "github.com/stagecoach-dev/stagecoach/internal/source/records"
	"github.com/stagecoach-dev/stagecoach/internal/source/registry"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// Runner holds what every Run needs: one per controller.
type Runner struct {
	client.Client
	// APIReader reads live what the cache may not hold yet, or does not hold at all (Secrets).
	APIReader client.Reader
	// Identity is the controller's user name, the requester of the Promotions it creates.
	Identity string
	Events   events.EventRecorder
	// FluxEvents, when set, sends Flux events about Flux appliers to notification-controller.
	FluxEvents events.AnnotatedEventRecorder
	// Clock tells the time (tests may fake it); the real clock when nil.
	Clock clock.PassiveClock
	// ClusterFreezeNamespace is the one namespace whose Freezes may hold Stages of other namespaces.
	ClusterFreezeNamespace string
	// ServerVersion reads the API server's version, for spec.prerequisites.kubernetesVersion.
	ServerVersion func(context.Context) (string, error)
	// Observer, when set, is told of Promotions that land or finish (metrics).
	Observer Observer

	// RegistrySource offers a registry source's versions; Follower an upstreamRecords source's
	// (nil: such Stages are told records are not read).
	RegistrySource *registry.Source
	Follower       *recordsource.Source
	// GitSource offers a git source's commits and verifies their signatures.
	GitSource *gitsource.Source
	// GitWriter pushes the Promotions of Stages that promote by commit (spec.promotion.git).
	GitWriter *gitwrite.Writer
	// Forges reaches the forge of a Stage that promotes by pull request; forge.New when nil.
	Forges func(forge.Options) (forge.Forge, error)
	// Charts resolves the tag of a chart given by version where the engine pulls it.
	Charts chart.Resolver

	// Signatures: the verdict cache, the transport that reads them, and the Sigstore trusted root
	// for Stages without verify.trustedRoot (nil: the shipped one).
	Verdicts            *verify.Cache
	RegistryTransport   http.RoundTripper
	SigstoreTrustedRoot []byte

	// Checks runs checks in the background; Annotator writes verified Promotions' phase
	// annotations in the background (nil: at once).
	Checks    *CheckRuns
	Annotator *PhaseAnnotator

	// Attestor signs the promotion attestations of Stages with spec.attest (nil: none are
	// written); Cluster names this cluster in them.
	Attestor *attest.Signer
	Cluster  string
	// Secrets reads the Secrets Stages name (registry credentials, the attestation push's), as
	// far as each Stage's author may.
	Secrets *authz.Secrets
	// attestFailures counts, per Stage, the attestation attempts that failed in a row (backoff).
	attestFailures sync.Map
}

func (r *Runner) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}
