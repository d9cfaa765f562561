package promotion

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	fluxsig "github.com/fluxcd/pkg/git/signature"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
	"github.com/stagecoach-dev/stagecoach/internal/gitedit"
	"github.com/stagecoach-dev/stagecoach/internal/gitwrite"
	gitsource "github.com/stagecoach-dev/stagecoach/internal/source/git"
	"github.com/stagecoach-dev/stagecoach/internal/subst"
)

// gitRollout writes a Promotion's version as a commit to the environment's branch
// (spec.promotion.git) and reads the engine's proof on the applier, which syncs that branch, at
// the commit pushed. Stagecoach never writes the applier's spec: Git says what runs.
type gitRollout struct {
	applier applier.Applier
	spec    stagecoachv1.GitPromotion
}

var _ Rollout = gitRollout{}

// GitRollout is the rollout of a Stage that promotes by commit; a observes the applier.
func GitRollout(a applier.Applier, spec stagecoachv1.GitPromotion) Rollout {
	return gitRollout{applier: a, spec: spec}
}

// revision is what Stagecoach last wrote: Git, not the applier, holds the version.
func (gitRollout) revision(run *Run) string { return run.stage.Status.LastAppliedDigest }

func (gitRollout) phaseOnApplier() bool { return true }

func (g gitRollout) step(ctx context.Context, run *Run, p *stagecoachv1.Promotion) (time.Duration, error) {
	obs := applier.Observation{Phase: applier.Progressing, Reason: stagecoachv1.ReasonWaitingForSync, Message: "not pushed yet"}
	if c := p.Status.Commit; c != nil {
		at, err := g.landingCommit(ctx, run, p)
		if err != nil {
			return 0, err
		}
		obs = g.applier.Observe(run.obj, gitsource.Digest(at))
		if obs.Phase == applier.Progressing {
			// Argo CD compares each new commit of the branch, but syncs none that changes nothing
			// of this Application: a comparison at a later commit that holds what was written
			// stands for one at it (another Stage's promotion came right after).
			if compared := g.applier.ComparedCommit(run.obj); compared != "" && compared != at {
				if holds, err := g.holds(ctx, run, p, compared); err != nil {
					return 0, err
				} else if holds {
					obs = g.applier.ObserveCompared(run.obj, gitsource.Digest(at), compared)
				}
			}
		}
	} else if g.spec.PullRequest != nil {
		// Proposed, reviewed and merged on the forge first (pullrequest.go).
		merged, requeue, err := g.pullRequest(ctx, run, p)
		if err != nil || !merged {
			return requeue, err
		}
	}
	return run.advance(ctx, p, obs, g.applier, func() (bool, string, error) {
		applied, err := g.apply(ctx, run, p)
		if err != nil || !applied {
			return false, "", err
		}
		c := p.Status.Commit
		how := "pushed commit " + gitsource.Short(c.SHA)
		if pr := p.Status.PullRequest; pr != nil && c.Written {
			how = fmt.Sprintf("merged pull request #%d (%s) as commit %s", pr.Number, pr.URL, gitsource.Short(c.SHA))
		} else if !c.Written {
			how = "branch already held it at " + gitsource.Short(c.SHA)
		}
		return true, fmt.Sprintf("%s to %s of %s; waiting for %s '%s' to sync it", how, c.Branch, g.spec.URL, run.obj.GetKind(), run.obj.GetName()), nil
	})
}

// landingCommit is the commit at which the Promotion's landing is proven: the one it wrote, or a
// later commit of the branch that the engine synced instead when it still holds what was written
// (another Stage's promotion to the same branch came right after).
func (g gitRollout) landingCommit(ctx context.Context, run *Run, p *stagecoachv1.Promotion) (string, error) {
	written := p.Status.Commit.SHA
	synced := g.applier.SyncedCommit(run.obj)
	if synced == "" || synced == written {
		return written, nil
	}
	holds, err := g.holds(ctx, run, p, synced)
	if err != nil {
		return "", err
	}
	if holds {
		return synced, nil
	}
	return written, nil
}

// holds tells whether commit, a later commit of the branch, still holds what the Promotion wrote.
func (g gitRollout) holds(ctx context.Context, run *Run, p *stagecoachv1.Promotion, commit string) (bool, error) {
	written := p.Status.Commit.SHA
	req, problem, err := g.change(ctx, run, p)
	if err != nil || problem != "" {
		return false, err // the write would fail the same way: observe what was written
	}
	holds, err := run.r.GitWriter.Holds(ctx, req, commit, written)
	if err != nil {
		return false, fmt.Errorf("failed to tell whether commit %s of %s holds Promotion %s's commit %s: %w",
			gitsource.Short(commit), g.spec.URL, p.Name, gitsource.Short(written), err)
	}
	return holds, nil
}

// apply writes the version to the branch once (a pull request's merge has written it already)
// and asks the engine to look at it now.
func (g gitRollout) apply(ctx context.Context, run *Run, p *stagecoachv1.Promotion) (bool, error) {
	if p.Status.Commit != nil {
		if err := g.recordOnStage(ctx, run, p); err != nil {
			return false, err
		}
		return true, g.nudge(ctx, run, p)
	}
	res, done, err := g.write(ctx, run, p, "")
	if err != nil || done {
		return false, err
	}
	if err := g.onBranch(ctx, run, p, res.Commit, res.Written); err != nil {
		return false, err
	}
	if res.Written {
		run.event(p, corev1.EventTypeNormal, stagecoachv1.ReasonGitPushed, "Pushed %s to %s of %s as commit %s (%d attempt(s))",
			versionString(p.Status.Version), g.spec.Branch, g.spec.URL, gitsource.Short(res.Commit), res.Attempts)
	}
	return true, g.nudge(ctx, run, p)
}

// write makes the Promotion's commit on the branch's head and pushes it to the branch, or to
// pushBranch (a pull request's). done: the Promotion was finished (the write cannot be made)
// or aborted (a foreign commit froze the Stage).
func (g gitRollout) write(ctx context.Context, run *Run, p *stagecoachv1.Promotion, pushBranch string) (gitwrite.Result, bool, error) {
	stage := run.stage
	if err := run.flushAnnotations(ctx); err != nil {
		return gitwrite.Result{}, false, err
	}
	if err := run.saveAdoption(ctx); err != nil {
		return gitwrite.Result{}, false, err
	}
	req, problem, err := g.request(ctx, run, p)
	if err != nil {
		return gitwrite.Result{}, false, err
	}
	if problem != "" {
		return gitwrite.Result{}, true, run.finishFailed(ctx, p, stagecoachv1.ReasonGitWriteFailed, "not pushed: "+problem)
	}
	req.PushBranch = pushBranch
	res, err := run.r.GitWriter.Write(ctx, req)
	var foreign *gitwrite.ForeignCommitError
	switch {
	case errors.As(err, &foreign):
		return res, true, g.frozen(ctx, run, p, foreign)
	case errors.Is(err, gitwrite.ErrCannotWrite), errors.Is(err, gitsource.ErrUnauthorized), errors.Is(err, gitsource.ErrRefNotFound):
		return res, true, run.finishFailed(ctx, p, stagecoachv1.ReasonGitWriteFailed, fmt.Sprintf("not pushed to %s of %s: %v; fix spec.promotion.git of Stage %s or the repository, then promote again",
			g.spec.Branch, g.spec.URL, err, stage.Name))
	case err != nil:
		return res, false, fmt.Errorf("failed to push %s to %s of %s for Stage %q: %w", p.Status.Version.Digest, g.spec.Branch, g.spec.URL, stage.Name, err)
	}
	return res, false, nil
}

// onBranch records that the branch holds the Promotion's version at commit: on the Promotion
// first (landing is proven at that commit), then on the Stage (a later commit after it that
// Stagecoach did not write is someone else's).
func (g gitRollout) onBranch(ctx context.Context, run *Run, p *stagecoachv1.Promotion, commit string, written bool) error {
	p.Status.Commit = &stagecoachv1.PushedCommit{SHA: commit, Branch: g.spec.Branch, Written: written}
	if err := run.status.save(ctx, p); err != nil {
		return err
	}
	return g.recordOnStage(ctx, run, p)
}

// recordOnStage says on the Stage that the branch holds p's version at its commit; written again
// when a lost Stage write left it behind the Promotion (the Promotion is saved first).
func (g gitRollout) recordOnStage(ctx context.Context, run *Run, p *stagecoachv1.Promotion) error {
	last := &stagecoachv1.BranchCommit{SHA: p.Status.Commit.SHA, URL: g.spec.URL, Branch: g.spec.Branch}
	st := &run.stage.Status
	if st.LastAppliedDigest == p.Status.Version.Digest && st.LastCommit != nil && *st.LastCommit == *last {
		return nil
	}
	st.LastAppliedDigest, st.LastCommit = p.Status.Version.Digest, last
	return run.commit(ctx)
}

// nudge writes the applier's phase annotations and asks the engine to fetch the branch now
// (Argo CD's refresh, Flux's requestedAt), instead of at its next poll.
func (g gitRollout) nudge(ctx context.Context, run *Run, p *stagecoachv1.Promotion) error {
	orig := annotationBase(run.obj)
	a := run.obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	if run.obj.GetKind() == "Application" {
		a[applier.RefreshAnnotation] = "normal"
	} else {
		a[applier.RequestedAtAnnotation] = run.now.UTC().Format(time.RFC3339Nano)
	}
	run.obj.SetAnnotations(a)
	setPromotionAnnotations(run.obj, p, stagecoachv1.PhaseRunning)
	if err := run.r.Patch(ctx, run.obj, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to ask %s %q to fetch %s: %w", run.obj.GetKind(), run.obj.GetName(), g.spec.Branch, err)
	}
	return nil
}

// frozen stops the Stage on a commit Stagecoach did not write, as a foreign write to an applier.
func (g gitRollout) frozen(ctx context.Context, run *Run, p *stagecoachv1.Promotion, foreign *gitwrite.ForeignCommitError) error {
	stage := run.stage
	msg := fmt.Sprintf("branch %s of %s: %v, which Stagecoach did not write. Check it, then create an Unfreeze Promotion (stagecoach unfreeze -n %s --stage %s) to accept the branch as it is, and promote again",
		g.spec.Branch, g.spec.URL, foreign, stage.Namespace, stage.Name)
	run.setFrozen(stagecoachv1.ReasonForeignWrite, msg)
	if err := run.commit(ctx); err != nil {
		return err
	}
	run.event(stage, corev1.EventTypeWarning, stagecoachv1.EventFrozen, "%s", msg)
	run.engineEvent(p, corev1.EventTypeWarning, stagecoachv1.EventFrozen, msg)
	return run.status.finish(ctx, p, stagecoachv1.PhaseAborted, "not pushed: "+msg)
}

// request is the write of p's version: the edits or the merge, the message, the author, the
// credentials and signing key from the Stage's namespace. problem says why it cannot be made.
func (g gitRollout) request(ctx context.Context, run *Run, p *stagecoachv1.Promotion) (gitwrite.Request, string, error) {
	stage, spec := run.stage, g.spec
	req, problem, err := g.change(ctx, run, p)
	if err != nil || problem != "" {
		return req, problem, err
	}
	req.Now, req.Message = run.now, CommitMessage(stage, p)
	req.Author = gitwrite.Author{Name: "Stagecoach", Email: "stagecoach@stagecoach.dev"}
	if last := stage.Status.LastCommit; last != nil && last.URL == spec.URL && last.Branch == spec.Branch {
		// Another repository or branch in the spec starts afresh, as a first write does.
		req.LastCommit = last.SHA
	}
	if spec.Author != nil {
		req.Author = gitwrite.Author{Name: spec.Author.Name, Email: spec.Author.Email}
	}
	req.Ours = OursFor(stage, nil)
	if ref := spec.SigningKeyRef; ref != nil {
		data, problem, err := g.secret(ctx, run, ref.Name, "signing key")
		if err != nil || problem != "" {
			return req, problem, err
		}
		var public gitsource.Keys
		if req.Signer, public, err = SignerFrom(data); err != nil {
			return req, fmt.Sprintf("the signing key in Secret '%s/%s' cannot be used: %v", stage.Namespace, ref.Name, err), nil
		}
		req.Ours = OursFor(stage, &public)
	}
	return req, "", nil
}

// change is where p's version goes and what it changes there: the repository with its
// credentials, the branch, and the edits or the commit to merge. It is all the landing check
// needs (landingCommit), without the signing key a write takes.
func (g gitRollout) change(ctx context.Context, run *Run, p *stagecoachv1.Promotion) (gitwrite.Request, string, error) {
	stage, spec, version := run.stage, g.spec, p.Status.Version
	req := gitwrite.Request{URL: spec.URL, Branch: spec.Branch, Key: spec.URL + " " + stage.Namespace + "/", Now: run.now}
	if ref := spec.SecretRef; ref != nil {
		req.Key += ref.Name
		data, problem, err := g.secret(ctx, run, ref.Name, "credentials")
		if err != nil || problem != "" {
			return req, problem, err
		}
		if req.Credentials, err = gitsource.CredentialsFrom(spec.URL, data); err != nil {
			return req, fmt.Sprintf("the credentials in Secret '%s/%s' cannot be used: %v", stage.Namespace, ref.Name, err), nil
		}
	}
	if spec.Merge {
		sha, ok := strings.CutPrefix(version.Digest, gitsource.DigestPrefix)
		if !ok {
			return req, fmt.Sprintf("promotion.git.merge merges a Git commit, and %s is not one", version.Digest), nil
		}
		req.Merge = sha
		return req, "", nil
	}
	for _, e := range spec.Set {
		edit, err := EditFor(e, stage.Name, version)
		if err != nil {
			return req, err.Error(), nil
		}
		req.Edits = append(req.Edits, edit)
	}
	return req, "", nil
}

func (g gitRollout) secret(ctx context.Context, run *Run, name, what string) (map[string][]byte, string, error) {
	secret := &corev1.Secret{}
	err := run.r.APIReader.Get(ctx, client.ObjectKey{Namespace: run.stage.Namespace, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("Secret '%s/%s' with the %s of spec.promotion.git is missing: create it", run.stage.Namespace, name, what), nil
	case err != nil:
		return nil, "", fmt.Errorf("failed to read Secret '%s/%s' (%s of spec.promotion.git): %w", run.stage.Namespace, name, what, err)
	}
	return secret.Data, "", nil
}

// EditFor is the edit of one spec.promotion.git.set entry for a version.
func EditFor(e stagecoachv1.GitFileEdit, stage string, version *stagecoachv1.VersionReference) (gitwrite.Edit, error) {
	if e.Image != "" {
		if applier.KindOf(version.Digest) != applier.OCIDigests {
			return gitwrite.Edit{}, fmt.Errorf("promotion.git.set %s: image %q is given an image digest, and %s is not one: use key and value for a commit",
				e.Path, e.Image, version.Digest)
		}
		return gitwrite.Edit{Path: e.Path, Apply: func(b []byte) ([]byte, error) {
			return gitedit.KustomizationImage(b, e.Image, version.Digest)
		}}, nil
	}
	value, err := RenderValue(e.Value, stage, version)
	if err != nil {
		return gitwrite.Edit{}, fmt.Errorf("promotion.git.set %s: %w", e.Path, err)
	}
	return gitwrite.Edit{Path: e.Path, Apply: func(b []byte) ([]byte, error) {
		return gitedit.Value(b, e.Key, value)
	}}, nil
}

// RenderValue renders a promotion.git.set value ({{ .Digest }} when empty).
func RenderValue(value, stage string, version *stagecoachv1.VersionReference) (string, error) {
	if value == "" {
		value = "{{ .Digest }}"
	}
	const fields = "use {{ .Digest }}, {{ .Version }}, {{ .Revision }} or {{ .Stage }}"
	tmpl, err := subst.Parse("value", value, fields)
	if err != nil {
		return "", fmt.Errorf("value %q does not parse: %v; %s", value, err, fields)
	}
	data := struct{ Digest, Version, Revision, Stage string }{Digest: version.Digest, Version: version.Tag,
		Revision: strings.TrimPrefix(version.Digest, gitsource.DigestPrefix), Stage: stage}
	out, err := tmpl.Execute(data)
	if err != nil {
		return "", fmt.Errorf("value %q does not render: %v; %s", value, err, fields)
	}
	return out, nil
}

// Trailers of a promotion commit: they say which Stage and Promotion wrote it.
const (
	StageTrailer     = "Stagecoach-Stage"
	PromotionTrailer = "Stagecoach-Promotion"
)

// CommitMessage says what a promotion commit does: the version, the Stage, the gates it passed
// and the Promotion, with trailers naming the Stage and the Promotion.
func CommitMessage(stage *stagecoachv1.Stage, p *stagecoachv1.Promotion) string {
	var b strings.Builder
	version := p.Status.Version.Tag
	if version == "" {
		version = p.Status.Version.Digest
		if sha := gitsource.Commit(version); sha != "" {
			// A person's promote of a commit names no tag: call it as automation does.
			version = gitsource.Short(sha)
		}
	}
	if p.Spec.Action == stagecoachv1.ActionRollback {
		fmt.Fprintf(&b, "Revert %s in %s to %s\n\n", stage.Spec.Service, stage.Spec.Environment, version)
		fmt.Fprintf(&b, "Rolls back to the last verified version: %s\n", oneLine(p.Spec.Reason))
	} else {
		fmt.Fprintf(&b, "Promote %s to %s in %s\n\n", stage.Spec.Service, version, stage.Spec.Environment)
	}
	fmt.Fprintf(&b, "Version: %s (%s)\n", version, p.Status.Version.Digest)
	if len(p.Status.Gates) > 0 {
		b.WriteString("Gates:\n")
		for _, gate := range p.Status.Gates {
			fmt.Fprintf(&b, "- %s %s", gate.Gate, verdictOf(gate))
			if gate.Message != "" {
				fmt.Fprintf(&b, ": %s", firstLine(gate.Message))
			}
			b.WriteString("\n")
		}
	}
	if p.Spec.RequestedBy != "" {
		fmt.Fprintf(&b, "Requested by: %s\n", oneLine(p.Spec.RequestedBy))
	}
	fmt.Fprintf(&b, "\n%s: %s/%s\n%s: %s\n", StageTrailer, stage.Namespace, stage.Name, PromotionTrailer, p.Name)
	return b.String()
}

// OursFor recognises the commits Stagecoach wrote for stage: the Stage trailer, and, when the
// Stage signs (signedBy holds its public key), a signature of that key; anyone who may push can
// write a trailer, no one else can sign with the Stage's key. Without a key the trailer is all
// there is: sign the commits, or protect the branch.
func OursFor(stage *stagecoachv1.Stage, signedBy *gitsource.Keys) func(*object.Commit) bool {
	trailer := fmt.Sprintf("\n%s: %s/%s\n", StageTrailer, stage.Namespace, stage.Name)
	return func(c *object.Commit) bool {
		if !strings.Contains(c.Message, trailer) {
			return false
		}
		if signedBy == nil {
			return true
		}
		_, err := gitsource.SignedBy(c, *signedBy)
		return err == nil
	}
}

// SignerFrom reads a signing key Secret as Flux's ImageUpdateAutomation does: git.asc (an armored
// OpenPGP private key, passphrase when encrypted), or identity (an SSH private key, password
// when encrypted).
// It returns the signer and its public key, to tell Stagecoach's own commits by their signature.
func SignerFrom(data map[string][]byte) (gogit.Signer, gitsource.Keys, error) {
	if armored, ok := data["git.asc"]; ok {
		entities, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(armored))
		if err != nil {
			return nil, gitsource.Keys{}, fmt.Errorf("git.asc is not an armored OpenPGP key: %w", err)
		}
		if len(entities) != 1 {
			return nil, gitsource.Keys{}, fmt.Errorf("git.asc holds %d keys: give exactly one", len(entities))
		}
		e := entities[0]
		if e.PrivateKey == nil {
			return nil, gitsource.Keys{}, errors.New("git.asc holds a public key: give the private key")
		}
		if e.PrivateKey.Encrypted {
			if err := e.PrivateKey.Decrypt(data["passphrase"]); err != nil {
				return nil, gitsource.Keys{}, fmt.Errorf("the passphrase does not decrypt git.asc: %w", err)
			}
		}
		var public bytes.Buffer
		w, err := armor.Encode(&public, openpgp.PublicKeyType, nil)
		if err == nil {
			err = e.Serialize(w)
		}
		if err == nil {
			err = w.Close()
		}
		if err != nil {
			return nil, gitsource.Keys{}, fmt.Errorf("the public key of git.asc: %w", err)
		}
		signer, err := fluxsig.NewOpenPGPSigner(e)
		return signer, gitsource.Keys{PGP: []string{public.String()}}, err
	}
	if identity, ok := data["identity"]; ok {
		signer, err := fluxsig.NewSSHSigner(identity, data["password"])
		if err != nil {
			return nil, gitsource.Keys{}, err
		}
		var key any
		if pw := data["password"]; len(pw) > 0 {
			key, err = ssh.ParseRawPrivateKeyWithPassphrase(identity, pw)
		} else {
			key, err = ssh.ParseRawPrivateKey(identity)
		}
		if err != nil {
			return nil, gitsource.Keys{}, err
		}
		sshSigner, err := ssh.NewSignerFromKey(key)
		if err != nil {
			return nil, gitsource.Keys{}, err
		}
		return signer, gitsource.Keys{SSH: []string{string(ssh.MarshalAuthorizedKey(sshSigner.PublicKey()))}}, nil
	}
	return nil, gitsource.Keys{}, errors.New("it has neither git.asc (OpenPGP) nor identity (SSH)")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// verdictOf says a gate's verdict in a word.
func verdictOf(gate stagecoachv1.GateResult) string {
	if gate.Passed {
		return "passed"
	}
	return "failed"
}

// oneLine puts free text on one line: what a person wrote never starts a line of a commit
// message, so it can never pass for a trailer.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// acceptBranch, on an Unfreeze, takes the branch as it is now: the next write does not judge the
// commits before it.
func (gitRollout) acceptBranch(run *Run) string {
	if run.stage.Status.LastCommit == nil {
		return ""
	}
	run.stage.Status.LastCommit = nil
	return "; the commits on the branch are accepted as written"
}
