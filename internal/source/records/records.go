// Package records offers a Stage the versions another Stage (usually in another cluster) verified,
// as its signed records in an OCI registry show them (spec.source.upstreamRecords).
//
// The follower reads a stream incrementally, at most once per Interval for automation and afresh
// when a promote is about to start (Published), verifies every record's signature against the
// trust config and the hash chain, and offers what the upstream verified and nothing excludes.
// The version must also exist in the Stage's own apply repository.
package records

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/internal/records"
	"github.com/stagecoach-dev/stagecoach/internal/records/trust"
	"github.com/stagecoach-dev/stagecoach/internal/source"
	"github.com/stagecoach-dev/stagecoach/internal/source/registry"
)

// DefaultInterval is how often automation reads a stream at most.
const DefaultInterval = 30 * time.Second

// Source follows upstream record streams.
type Source struct {
	// Trust is the parsed --upstream-trust at start; nil means none (every follower is
	// UpstreamUntrusted). SetTrust replaces it while the Source runs.
	Trust *trust.Config
	// Secrets reads the Stages' credential Secrets.
	Secrets registry.Secrets
	// Transport is the base round tripper for registries (ociclient.NewTransport).
	Transport http.RoundTripper
	// Interval is how often automation reads a stream at most; DefaultInterval when zero.
	Interval time.Duration
	// Insecure allows plain HTTP to registries that are not on loopback.
	Insecure bool
	// RepositoryOf reads the Stage's apply repository from its applier when
	// spec.source.upstreamRecords.applyRepository is empty; "" when it cannot tell.
	RepositoryOf func(ctx context.Context, stage *stagecoachv1.Stage) string
	// Commits says whether the commit of a digest (sha1:<SHA>) is on a branch of the Stage's
	// spec.source.upstreamRecords.gitRepository, fetched as far as the Stage's author may: a
	// problem for people, or "". Nil: this controller follows no streams of commits.
	Commits func(ctx context.Context, stage *stagecoachv1.Stage, digest string) (string, error)

	mu      sync.Mutex
	follows map[types.NamespacedName]*follow
	exists  map[string]bool
	// untrusted says why Trust is nil when a trust config is named but cannot be used.
	untrusted string
	// trustGen counts SetTrust calls: a view built under another trust config is read again.
	trustGen int
}

// SetTrust replaces the trust config: nil with why when the named config cannot be used (every
// follower is then UpstreamUntrusted, saying why). Every view is rebuilt from the start of its
// stream under the new config, so a key taken out no longer vouches for records read before.
func (s *Source) SetTrust(tc *trust.Config, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Trust, s.untrusted = tc, why
	s.trustGen++
}

// trust returns the trust config, or nil and the message of a follower without one.
func (s *Source) trust() (*trust.Config, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Trust != nil {
		return s.Trust, ""
	}
	if s.untrusted != "" {
		return nil, s.untrusted
	}
	return nil, Untrusted
}

var _ source.Source = (*Source)(nil)

// follow is what the Source knows of one Stage's stream.
type follow struct {
	repository, stream string
	// trustGen is the Source's trustGen the view was built under.
	trustGen int
	store    *records.Store
	view     *records.View
	at       time.Time
	// err is the last read's failure; nil once a read succeeded.
	err error
	// stale says why the view is too old for spec.source.upstreamRecords.maxAge, as of the last
	// time the Stage asked for an offer; "" when it is not.
	stale string
}

// State is the follower's state of a Stage, for its status.
type State struct {
	// Seen is the newest upstream record read (status.upstreamSeen); nil before the first read.
	Seen *records.Seen
	// Skipped counts records no trusted key signed, said in the Ready message.
	Skipped int
	// Reason and Message are set while the Stage cannot be Ready (UpstreamUntrusted,
	// UpstreamUnreadable, or UpstreamStale: read, but older than maxAge).
	Reason, Message string
}

// RecheckAfter is how soon a refused promote reads the stream again.
func (s *Source) RecheckAfter() time.Duration { return s.interval() }

func (s *Source) interval() time.Duration {
	if s.Interval > 0 {
		return s.Interval
	}
	return DefaultInterval
}

// Untrusted is the message of a follower without a trust config.
const Untrusted = "this controller has no upstream trust config, so it cannot check the upstream's records: start it with --upstream-trust naming a file (or configmap:NAMESPACE/NAME) of the upstream recorder's public keys bound to their streams"

// State returns the follower's state of stage, reading nothing.
func (s *Source) State(stage *stagecoachv1.Stage) State {
	if tc, why := s.trust(); tc == nil {
		return State{Reason: stagecoachv1.ReasonUpstreamUntrusted, Message: why}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.follows[client.ObjectKeyFromObject(stage)]
	if f == nil {
		return State{}
	}
	st := State{}
	if f.view != nil {
		st.Skipped = f.view.Skipped
		if f.view.Head.Seq > 0 {
			h := f.view.Head
			st.Seen = &h
		}
	}
	switch {
	case f.err != nil:
		st.Reason, st.Message = reasonOf(f.err), fmt.Sprintf("cannot follow upstream records of stream %q in %s: %v", f.stream, f.repository, f.err)
	case f.stale != "":
		st.Reason, st.Message = stagecoachv1.ReasonUpstreamStale, f.stale
	}
	return st
}

// staleness says why the stream, as the Stage's view shows it, is older than
// spec.source.upstreamRecords.maxAge at now; "" when it is not, or there is no bound.
//
// Why a bound on the follower and not a heartbeat from the recorder: records are written only
// when the upstream takes a step, so a repository or mirror that stops showing the newest ones
// (withheld, truncated, stale) looks exactly like a quiet upstream, and a failure recorded there
// goes unseen by a follower that never read past it (status.upstreamSeen only catches a cut
// after a read). The follower cannot tell the two apart; it can refuse to act on a history it
// cannot show is recent. A heartbeat would need a new record kind, grow every stream forever and
// still need this bound to mean anything; the bound alone is opt-in, needs no change upstream,
// and its cost (a quiet upstream stops the follower too) is said in the message.
func staleness(src *stagecoachv1.UpstreamRecordsSource, f *follow, now time.Time) string {
	if src.MaxAge == nil || src.MaxAge.Duration <= 0 || f.view == nil {
		return ""
	}
	bound, v := src.MaxAge.Duration, f.view
	if v.Head.Seq == 0 {
		return fmt.Sprintf("stream %q in %s holds no trusted record, so nothing shows it is newer than spec.source.upstreamRecords.maxAge (%s); "+
			"no version is offered until the upstream records a step there", f.stream, f.repository, bound)
	}
	age := now.Sub(v.HeadRecorded)
	if age <= bound {
		return ""
	}
	return fmt.Sprintf("the newest trusted record of stream %q in %s, record %d, was recorded %s ago (at %s), longer ago than spec.source.upstreamRecords.maxAge (%s): "+
		"newer records may be withheld (a stale or truncated mirror), or the upstream took no step since; "+
		"no version is offered until a newer record arrives (raise maxAge if the upstream is only quiet)",
		f.stream, f.repository, v.Head.Seq, age.Round(time.Second), v.HeadRecorded.UTC().Format(time.RFC3339), bound)
}

func reasonOf(err error) string {
	if errors.Is(err, records.ErrUntrusted) {
		return stagecoachv1.ReasonUpstreamUntrusted
	}
	return stagecoachv1.ReasonUpstreamUnreadable
}

// read extends the Stage's view when due (or now, when fresh), and returns it; on error the
// Stage's follow keeps the error until a read succeeds.
func (s *Source) read(ctx context.Context, stage *stagecoachv1.Stage, now time.Time, fresh bool) (*follow, error) {
	src := stage.Spec.Source.UpstreamRecords
	key := client.ObjectKeyFromObject(stage)
	s.mu.Lock()
	if s.follows == nil {
		s.follows = map[types.NamespacedName]*follow{}
	}
	f := s.follows[key]
	tc, gen := s.Trust, s.trustGen
	s.mu.Unlock()
	if f == nil || f.repository != src.Repository || f.stream != src.Stream || f.trustGen != gen {
		f = &follow{repository: src.Repository, stream: src.Stream, trustGen: gen}
	}
	var seen *records.Seen
	if us := stage.Status.UpstreamSeen; us != nil && us.Seq > 0 {
		seen = &records.Seen{Seq: us.Seq, Digest: us.Digest}
	} else if f.view != nil && f.view.Head.Seq > 0 && stage.Status.UpstreamSeen == nil && f.err != nil {
		// A person cleared status.upstreamSeen after a cut: start again from the stream as it is.
		f.view = nil
	}
	if !fresh && f.err == nil && f.view != nil && now.Before(f.at.Add(s.interval())) {
		f.stale = staleness(src, f, now)
		return f, nil
	}
	if f.store == nil {
		keychain, block, err := registry.Keychain(ctx, s.Secrets, stage, src.SecretRef, "spec.source.upstreamRecords.secretRef")
		if err != nil {
			return nil, err
		}
		if block != nil {
			f.err = errors.New(block.Message)
			s.put(key, f)
			return f, nil
		}
		store, err := records.NewStore(src.Repository, ociclient.Options{Keychain: keychain, Insecure: s.Insecure, Transport: s.Transport})
		if err != nil {
			f.err = err
			s.put(key, f)
			return f, nil
		}
		f.store = store
	}
	follower := records.Follower{Store: f.store, Trust: tc}
	view, err := follower.Read(ctx, src.Stream, f.view, seen)
	f.at = now
	if err != nil {
		f.err = err
	} else {
		f.view, f.err = view, nil
	}
	f.stale = staleness(src, f, now)
	s.put(key, f)
	return f, nil
}

func (s *Source) put(key types.NamespacedName, f *follow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.follows[key] = f
}

// Forget drops a deleted Stage's view.
func (s *Source) Forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.follows, key)
}

// cites is how every verdict names the record it relied on.
func cites(v *records.View) string {
	return fmt.Sprintf("upstreamSeq=%d upstreamHead=%s", v.Head.Seq, v.Head.Digest)
}

// Offer reads the stream when due and offers the newest version the upstream verified that
// nothing excludes and that exists in the Stage's apply repository.
func (s *Source) Offer(ctx context.Context, stage *stagecoachv1.Stage, now time.Time) (source.Offer, error) {
	block := func(reason, format string, args ...any) source.Offer {
		return source.Offer{Block: &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSource, Reason: reason, Message: fmt.Sprintf(format, args...)},
			Recheck: s.interval()}
	}
	if tc, why := s.trust(); tc == nil {
		return block(stagecoachv1.ReasonUpstreamUntrusted, "%s", why), nil
	}
	f, err := s.read(ctx, stage, now, false)
	if err != nil {
		return source.Offer{}, err
	}
	if f.err != nil {
		return block(reasonOf(f.err), "cannot follow upstream records of stream %q in %s: %v; no version is offered until a read succeeds",
			f.stream, f.repository, f.err), nil
	}
	if f.stale != "" {
		return block(stagecoachv1.ReasonUpstreamStale, "%s", f.stale), nil
	}
	offers := f.view.Offers()
	if len(offers) == 0 {
		return source.Offer{Recheck: s.interval()}, nil
	}
	o := offers[0]
	if problem, err := s.inApplyRepository(ctx, stage, o.Version.Digest); err != nil {
		return source.Offer{}, err
	} else if problem != "" {
		return block(stagecoachv1.ReasonNotPublished, "%s (%s)", problem, cites(f.view)), nil
	}
	at := metav1.NewTime(o.VerifiedAt)
	return source.Offer{Candidates: []plan.Candidate{{Digest: o.Version.Digest, Tag: o.Version.Tag, VerifiedAt: &at}},
		Recheck: s.interval()}, nil
}

// Published reads the stream afresh and says whether digest may be promoted (the input of the
// published gate, plan.ApplyGates): verified upstream, excluded by nothing, and present in the
// apply repository. Every verdict cites upstreamSeq and upstreamHead once the stream was read.
func (s *Source) Published(ctx context.Context, stage *stagecoachv1.Stage, digest string, now time.Time) (plan.PublishedVerdict, error) {
	notPublished := func(format string, args ...any) (plan.PublishedVerdict, error) {
		return plan.PublishedVerdict{Block: &stagecoachv1.GateBlock{Gate: stagecoachv1.GatePublished, Reason: stagecoachv1.ReasonNotPublished, Message: fmt.Sprintf(format, args...)}}, nil
	}
	if tc, why := s.trust(); tc == nil {
		return notPublished("%s", why)
	}
	f, err := s.read(ctx, stage, now, true)
	if err != nil {
		return plan.PublishedVerdict{}, err
	}
	if f.err != nil {
		return notPublished("%s is not promoted while the upstream's records cannot be checked: %v", digest, f.err)
	}
	if e, bad := f.view.Excluded(digest); bad {
		v, _ := notPublished("%s is never taken: %s (%s)", versionOf(e.Version), e.Why, cites(f.view))
		v.Excluded = true
		return v, nil
	}
	if f.stale != "" {
		return notPublished("%s is not promoted while the upstream's records are stale: %s", digest, f.stale)
	}
	o, ok := f.view.Offered(digest)
	if !ok {
		return notPublished("%s is not verified in the upstream's records of stream %q (%s)", digest, f.stream, cites(f.view))
	}
	if problem, err := s.inApplyRepository(ctx, stage, digest); err != nil {
		return plan.PublishedVerdict{}, err
	} else if problem != "" {
		return notPublished("%s (%s)", problem, cites(f.view))
	}
	return plan.PublishedVerdict{Evidence: fmt.Sprintf("%s verified upstream in record %d (%s)", versionOf(o.Version), o.Seq, cites(f.view))}, nil
}

func versionOf(v records.Version) string {
	if v.Tag != "" {
		return v.Tag + " (" + v.Digest + ")"
	}
	return v.Digest
}

// inApplyRepository checks digest exists in the Stage's apply repository (one HEAD, remembered
// once found). It returns a problem for people, or "".
func (s *Source) inApplyRepository(ctx context.Context, stage *stagecoachv1.Stage, digest string) (string, error) {
	if stage.Spec.Source.UpstreamRecords.GitRepository != nil {
		if s.Commits == nil {
			return fmt.Sprintf("%s is offered by the upstream's records, but this controller checks no Git repositories", digest), nil
		}
		return s.Commits(ctx, stage, digest)
	}
	if strings.HasPrefix(digest, "sha1:") {
		return fmt.Sprintf("%s is a Git commit, and this Stage takes OCI digests: a Stage following a stream of commits names the Git repository its applier fetches, "+
			"spec.source.upstreamRecords.gitRepository", digest), nil
	}
	repo := stage.Spec.Source.UpstreamRecords.ApplyRepository
	if repo == "" && s.RepositoryOf != nil {
		repo = s.RepositoryOf(ctx, stage)
	}
	if repo == "" {
		return fmt.Sprintf("%s is offered by the upstream's records, but this Stage's apply repository is unknown: set spec.source.upstreamRecords.applyRepository", digest), nil
	}
	ref := repo + "@" + digest
	s.mu.Lock()
	found := s.exists[ref]
	s.mu.Unlock()
	if found {
		return "", nil
	}
	d, err := name.NewDigest(ref, ociclient.NameOptions(s.Insecure)...)
	if err != nil {
		return fmt.Sprintf("apply repository %q is not a valid OCI repository: %v", repo, err), nil
	}
	var keychain authn.Keychain
	if src := stage.Spec.Source.UpstreamRecords; src.SecretRef != nil {
		kc, block, err := registry.Keychain(ctx, s.Secrets, stage, src.SecretRef, "spec.source.upstreamRecords.secretRef")
		if err != nil {
			return "", err
		}
		if block != nil {
			return block.Message, nil
		}
		keychain = kc
	}
	if _, err := remote.Head(d, ociclient.RemoteOptions(ctx, ociclient.Options{Keychain: keychain, Insecure: s.Insecure, Transport: s.Transport})...); err != nil {
		err = ociclient.ClassifyError(repo, err)
		if errors.Is(err, ociclient.ErrNotFound) {
			return fmt.Sprintf("%s is verified upstream but does not exist in this Stage's apply repository %s: copy it there (or use a mirror that keeps digests)", digest, repo), nil
		}
		return fmt.Sprintf("cannot check that %s exists in this Stage's apply repository %s: %v", digest, repo, err), nil
	}
	s.mu.Lock()
	if s.exists == nil {
		s.exists = map[string]bool{}
	}
	s.exists[ref] = true
	s.mu.Unlock()
	return "", nil
}
