// Package check runs a Stage's checks (spec.promotion.checks before apply,
// spec.verification.checks after landing): built-in HTTP checks, check plugins and runs (objects
// created in the cluster, through RunObjects). A check never
// returns an error: every way it can go wrong is a failed Result whose message names the check
// and says why, because that message is what a person reads in the Stage's status.
package check

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	plugincheck "github.com/stagecoach-dev/stagecoach/plugin/check"
)

// DefaultTimeout bounds one attempt of a check without spec timeout.
const defaultTimeout = 30 * time.Second

// DefaultRunTimeout bounds one attempt of a run check without spec timeout: a Job or a pipeline
// takes minutes where an HTTP call takes seconds.
const DefaultRunTimeout = 10 * time.Minute

// Input is the version a check looks at, and where.
type Input struct {
	Stage       string
	Namespace   string
	Environment string
	Service     string
	// Version is the tag, Digest the digest (sha256:...).
	Version string
	Digest  string
	// Revision is the version's revision where it has one (a Git commit), else the digest.
	Revision string
	Phase    plugincheck.Phase
	// Promotion and PromotionUID name the Promotion the checks run for: a run object is owned
	// by it. Author is the Stage's spec.author: a run object is created only where they may.
	Promotion    string
	PromotionUID string
	Author       *v1alpha1.StageAuthor
}

// RunObjects creates a run check's object and judges it by its completion rules (package
// runcheck: it needs the cluster). attempt counts from 1; each attempt creates and judges its own
// run.
type RunObjects interface {
	Run(ctx context.Context, check string, spec *v1alpha1.RunCheck, in Input, attempt int, timeout time.Duration) Outcome
}

// Outcome of one attempt. Permanent stops the retries: trying again cannot help (a template
// that does not render, an author who may not create the kind).
type Outcome struct {
	Passed    bool
	Message   string
	Permanent bool
}

// Result of one check, after all its attempts.
type Result struct {
	// Name is the check's name.
	Name   string
	Passed bool
	// Message names the check and says why it passed or failed.
	Message string
	// Attempts made, 1 + retries at most; 0 when the check could not start (for example a
	// plugin whose checksum differs).
	Attempts int
}

// Runner runs checks. The zero value runs HTTP checks with its own client and no plugins.
type Runner struct {
	// PluginDir holds the check plugin binaries, each named as its spec.plugin.name.
	PluginDir string
	// HTTPClient makes the HTTP checks' requests (tests); when nil, a client whose every
	// connection passes the target guard (each attempt has its own deadline).
	HTTPClient *http.Client
	// AllowInternalTargets lets HTTP checks call private, shared, loopback, link-local and the
	// other special-purpose addresses, and cluster-internal names (the controller's
	// --allow-internal-check-targets).
	AllowInternalTargets bool
	// PluginDenyRead lists the hierarchies no plugin may read (with Landlock, where the kernel
	// has it); DefaultPluginDenyRead when nil. Tests deny a temporary directory instead.
	PluginDenyRead []string
	// Backoff is the wait before retry n (1 for the first retry); DefaultBackoff when nil.
	Backoff func(retry int) time.Duration
	// Runs creates and judges run checks' objects; a run check fails saying so when nil.
	Runs RunObjects

	clientOnce sync.Once
	client     *http.Client

	sandboxProbe  sync.Once
	sandboxErr    error
	sandboxLogged atomic.Bool
}

// DefaultBackoff waits 1s, 2s, 4s, … up to 10s between attempts: checks look at systems that
// were just changed, so a short wait is usually what a retry needs.
func defaultBackoff(retry int) time.Duration {
	d := time.Second << min(max(retry-1, 0), 4)
	return min(d, 10*time.Second)
}

// attempt is the outcome of one try. permanent stops the retries: trying again cannot help
// (a checksum mismatch, a URL template that does not parse).
type attempt struct {
	passed    bool
	message   string
	permanent bool
}

func (o Outcome) attempt() attempt {
	return attempt{passed: o.Passed, message: o.Message, permanent: o.Permanent}
}

// Run runs c for in and reports the outcome; it retries a failed attempt c.Retries times.
func (r *Runner) Run(ctx context.Context, c v1alpha1.Check, in Input) Result {
	timeout := defaultTimeout
	if c.Run != nil {
		timeout = DefaultRunTimeout
	}
	if c.Timeout != nil && c.Timeout.Duration > 0 {
		timeout = c.Timeout.Duration
	}

	var try func(ctx context.Context, timeout time.Duration) attempt
	switch {
	case kinds(c) > 1:
		return Result{Name: c.Name, Message: fmt.Sprintf("check %q sets more than one of http, plugin and run: keep one of them", c.Name)}
	case c.Run != nil:
		if r.Runs == nil {
			return Result{Name: c.Name, Message: fmt.Sprintf("check %q cannot run: this controller creates no run objects", c.Name)}
		}
		attempts := 0
		try = func(ctx context.Context, timeout time.Duration) attempt {
			attempts++
			return r.Runs.Run(ctx, c.Name, c.Run, in, attempts, timeout).attempt()
		}
	case c.HTTP != nil:
		h, err := r.prepareHTTP(c.HTTP, in)
		if err != nil {
			return Result{Name: c.Name, Message: fmt.Sprintf("check %q cannot run: %v", c.Name, err)}
		}
		try = h.try
	case c.Plugin != nil:
		p, err := r.preparePlugin(c.Name, c.Plugin, in)
		if err != nil {
			return Result{Name: c.Name, Message: fmt.Sprintf("check %q cannot run: %v", c.Name, err)}
		}
		try = p.try
	default:
		return Result{Name: c.Name, Message: fmt.Sprintf("check %q sets none of http, plugin and run: set one of them", c.Name)}
	}

	backoff := r.Backoff
	if backoff == nil {
		backoff = defaultBackoff
	}
	maxAttempts := 1 + int(max(c.Retries, 0))
	res := Result{Name: c.Name}
	var last attempt
	for res.Attempts < maxAttempts {
		if res.Attempts > 0 {
			if err := sleep(ctx, backoff(res.Attempts)); err != nil {
				break
			}
		}
		res.Attempts++
		last = try(ctx, timeout)
		if last.passed || last.permanent || ctx.Err() != nil {
			break
		}
	}

	res.Passed = last.passed
	switch {
	case last.passed:
		res.Message = fmt.Sprintf("check %q passed: %s", c.Name, last.message)
	case ctx.Err() != nil:
		res.Message = fmt.Sprintf("check %q stopped after %d attempt(s), the controller gave up on it (%v); last: %s",
			c.Name, res.Attempts, context.Cause(ctx), last.message)
	case res.Attempts > 1:
		res.Message = fmt.Sprintf("check %q failed %d attempts; last: %s", c.Name, res.Attempts, last.message)
	default:
		res.Message = fmt.Sprintf("check %q failed: %s", c.Name, last.message)
	}
	return res
}

// kinds counts the kinds of check c sets (one is valid).
func kinds(c v1alpha1.Check) int {
	n := 0
	for _, set := range []bool{c.HTTP != nil, c.Plugin != nil, c.Run != nil} {
		if set {
			n++
		}
	}
	return n
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
