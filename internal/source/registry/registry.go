// Package registry lists the candidate versions of an OCI repository: it filters tags by a
// semver constraint or a regular expression, orders them newest first, and resolves only the
// newest few to digests, so a repository with thousands of tags costs one listing and a handful
// of HEAD requests.
//
//	l := &registry.Lister{}
//	res, err := l.List(ctx, registry.Request{Repository: "registry.example/deploy/payments", Semver: ">=1.0.0"})
//	// res.Candidates[0] is the newest eligible tag with its digest.
package registry

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/semver"
)

// DefaultLimit is how many of the newest eligible tags List resolves to digests by default.
const DefaultLimit = 10

// defaultConcurrency bounds parallel HEAD requests to one registry.
const defaultConcurrency = 4

// signatureTag matches the tags cosign and the OCI referrers fallback use for a digest's
// signatures, attestations, SBOMs and referrer index; they are never versions.
var signatureTag = regexp.MustCompile(`^sha256-[0-9a-f]{64}(\.(sig|att|sbom))?$`)

// Lister lists candidate versions. The zero value is ready to use; it is safe for concurrent use.
type Lister struct {
	// Transport is the base HTTP transport; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// Concurrency bounds parallel digest lookups; 0 means 4.
	Concurrency int
	// RemoteOptions are appended to every registry call (tests tune retries with them).
	RemoteOptions []remote.Option
}

// Request says which repository to list and which tags qualify. Semver and Pattern are mutually
// exclusive; with neither, every tag qualifies.
type Request struct {
	// Repository such as registry.example/deploy/payments.
	Repository string
	// Semver is a constraint (see package semver) that tags, read as versions, must satisfy.
	Semver string
	// Pattern is a regular expression tags must match.
	Pattern string
	// Insecure allows plain HTTP to a registry that is not on loopback.
	Insecure bool
	// Keychain supplies credentials (see KeychainFromDockerConfig); nil means anonymous.
	Keychain authn.Keychain
	// Limit is how many of the newest eligible tags to resolve to digests; 0 means DefaultLimit.
	Limit int
}

// Candidate is one eligible tag and the manifest digest it points to now.
type Candidate struct {
	Tag string
	// Digest is the manifest digest, "sha256:<hex>".
	Digest string
	// Version is set when the tag parses as a semantic version.
	Version *semver.Version
}

// Result lists eligible candidates newest first.
type Result struct {
	Candidates []Candidate
	// Eligible counts every tag that qualified, including those beyond Limit.
	Eligible int
	// Skipped counts tags that did not qualify (no match, not a version, signature tags) or
	// vanished between listing and lookup.
	Skipped int
}

// KeychainFromDockerConfig builds a keychain from a docker-config Secret's JSON.
// It supports auths.<host>.auth and auths.<host>.username/password.
func KeychainFromDockerConfig(data []byte) (authn.Keychain, error) {
	return ociclient.KeychainFromDockerConfig(data)
}

// SchemeFor is the scheme List uses for a registry host: "http" only for loopback or insecure.
func SchemeFor(host string, insecure bool) string { return ociclient.SchemeFor(host, insecure) }

// List lists the repository's tags, keeps the eligible ones, and resolves the newest Limit of
// them to digests. Errors name the repository and wrap ociclient.ErrUnreachable,
// ErrUnauthorized or ErrNotFound.
func (l *Lister) List(ctx context.Context, req Request) (Result, error) {
	sel, err := newSelector(req)
	if err != nil {
		return Result{}, err
	}
	puller, repo, err := l.puller(ctx, req)
	if err != nil {
		return Result{}, err
	}
	tags, err := puller.List(ctx, repo)
	if err != nil {
		return Result{}, fmt.Errorf("failed to list tags of %q: %w", req.Repository, ociclient.ClassifyError(req.Repository, err))
	}

	eligible := sel.eligible(tags)
	res := Result{Eligible: len(eligible), Skipped: len(tags) - len(eligible)}
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	top := eligible[:min(limit, len(eligible))]
	digests, err := l.resolve(ctx, puller, repo, top)
	if err != nil {
		return Result{}, err
	}
	for i, c := range top {
		if digests[i] == "" {
			res.Skipped++ // deleted between listing and lookup
			continue
		}
		c.Digest = digests[i]
		res.Candidates = append(res.Candidates, c)
	}
	return res, nil
}

// Resolve returns the digest the repository's tag points to now ("" when the tag is gone). It
// checks the tag again after a version was promoted by its tag (a Helm chart version), which
// the engine resolves itself: a tag pushed again in between points elsewhere.
func (l *Lister) Resolve(ctx context.Context, req Request, tag string) (string, error) {
	puller, repo, err := l.puller(ctx, req)
	if err != nil {
		return "", err
	}
	digests, err := l.resolve(ctx, puller, repo, []Candidate{{Tag: tag}})
	if err != nil {
		return "", err
	}
	return digests[0], nil
}

func (l *Lister) puller(ctx context.Context, req Request) (*remote.Puller, name.Repository, error) {
	repo, err := name.NewRepository(req.Repository, ociclient.NameOptions(req.Insecure)...)
	if err != nil {
		return nil, name.Repository{}, fmt.Errorf("invalid repository %q: %w", req.Repository, err)
	}
	puller, err := remote.NewPuller(ociclient.RemoteOptions(ctx, ociclient.Options{
		Keychain:  req.Keychain,
		Insecure:  req.Insecure,
		Transport: l.Transport,
		Extra:     l.RemoteOptions,
	})...)
	if err != nil {
		return nil, name.Repository{}, fmt.Errorf("failed to set up registry client for %q: %w", req.Repository, err)
	}
	return puller, repo, nil
}

// resolve HEADs each candidate's tag; a tag that is gone gets an empty digest.
func (l *Lister) resolve(ctx context.Context, puller *remote.Puller, repo name.Repository, cands []Candidate) ([]string, error) {
	digests := make([]string, len(cands))
	errs := make([]error, len(cands))
	sem := make(chan struct{}, cmp.Or(l.Concurrency, defaultConcurrency))
	var wg sync.WaitGroup
	for i, c := range cands {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			desc, err := puller.Head(ctx, repo.Tag(c.Tag))
			switch {
			case err == nil:
				digests[i] = desc.Digest.String()
			case ociclient.IsNotFound(err):
			default:
				errs[i] = fmt.Errorf("failed to resolve tag %q of %q: %w", c.Tag, repo.String(),
					ociclient.ClassifyError(repo.String(), err))
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return digests, nil
}

// selector decides which tags qualify and in which order.
type selector struct {
	constraint *semver.Constraint
	pattern    *regexp.Regexp
}

func newSelector(req Request) (selector, error) {
	var s selector
	if req.Semver != "" && req.Pattern != "" {
		return s, fmt.Errorf("registry source for %q sets both semver and pattern; set one", req.Repository)
	}
	if req.Semver != "" {
		c, err := semver.ParseConstraint(req.Semver)
		if err != nil {
			return s, fmt.Errorf("registry source for %q: %w", req.Repository, err)
		}
		s.constraint = &c
	}
	if req.Pattern != "" {
		re, err := regexp.Compile(req.Pattern)
		if err != nil {
			return s, fmt.Errorf("registry source for %q: invalid pattern %q: %w", req.Repository, req.Pattern, err)
		}
		s.pattern = re
	}
	return s, nil
}

// eligible returns the qualifying tags, newest first: by semver precedence when a tag parses
// as a version (versions rank above non-versions), otherwise by reverse lexical order.
func (s selector) eligible(tags []string) []Candidate {
	out := make([]Candidate, 0, len(tags))
	for _, tag := range tags {
		if signatureTag.MatchString(tag) {
			continue
		}
		var ver *semver.Version
		if v, err := semver.Parse(tag); err == nil {
			ver = &v
		}
		switch {
		case s.constraint != nil:
			if ver == nil || !s.constraint.Check(*ver) {
				continue
			}
		case s.pattern != nil:
			if !s.pattern.MatchString(tag) {
				continue
			}
		}
		out = append(out, Candidate{Tag: tag, Version: ver})
	}
	slices.SortFunc(out, newestFirst)
	return out
}

func newestFirst(a, b Candidate) int {
	switch {
	case a.Version != nil && b.Version != nil:
		if c := b.Version.Compare(*a.Version); c != 0 {
			return c
		}
	case a.Version != nil:
		return -1
	case b.Version != nil:
		return 1
	}
	// Equal versions ("v1.0.0" and "1.0.0") and non-versions: reverse lexical, for a stable order.
	return cmp.Compare(b.Tag, a.Tag)
}
