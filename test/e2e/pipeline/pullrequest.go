package pipeline

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// GitOpsLane is the key of PullRequestDelivery's one Stage.
const GitOpsLane = "gitops"

// PullRequestDelivery promotes by pull request (issue 40): its Stage takes what an upstream Stage
// verified and writes the digest into the prod overlay of an environment repository on the stack's
// Gitea, through a pull request into branch env/prod that Stagecoach merges once the gates pass;
// an Argo CD Application following env/prod syncs the merge.
type PullRequestDelivery struct {
	Stack     *localstack.Stack
	Namespace string
	// StageName is the Stage's; Target the namespace it deploys into; Repo the environment
	// repository on Gitea.
	StageName, Target string
	Repo              *localstack.GiteaRepo
}

// SetupPullRequest starts the stack's Gitea (if not yet) and creates the delivery of service in
// namespace, following upstream.
func SetupPullRequest(ctx context.Context, s *localstack.Stack, namespace, service, upstream string) (*PullRequestDelivery, error) {
	forge, err := s.StartGitea(ctx)
	if err != nil {
		return nil, err
	}
	d := &PullRequestDelivery{Stack: s, Namespace: namespace, StageName: service + "-" + GitOpsLane, Target: namespace + "-" + service + "-" + GitOpsLane}
	for _, ns := range []string{namespace, d.Target} {
		if err := s.Namespace(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	if d.Repo, err = forge.CreateRepo(ctx, namespace+"-"+service+"-environments"); err != nil {
		return nil, err
	}
	const overlay = "prod/configmap.yaml"
	if _, err := d.Repo.Commit("env/prod", "prod overlay", overlay, fmt.Sprintf(
		"# The %s release running in prod: Stagecoach writes data.digest by pull request.\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  digest: none\n",
		service, service)); err != nil {
		return nil, err
	}
	for name, data := range map[string]map[string][]byte{
		d.StageName + "-push":  {"username": []byte(forge.Admin), "password": []byte(forge.AdminPassword)},
		d.StageName + "-token": {"token": []byte(forge.AdminToken)},
	} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
		if err := s.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	app := fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: %[2]s, namespace: %[1]s, labels: {stagecoach.dev/stage: %[2]s}}
spec:
  project: default
  source: {repoURL: %[3]s, path: prod, targetRevision: env/prod}
  destination: {server: https://kubernetes.default.svc, namespace: %[4]s}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
`, namespace, d.StageName, d.Repo.URL, d.Target)
	if err := localstack.ApplyYAML(ctx, s.Client, []byte(app)); err != nil {
		return nil, err
	}
	st := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: d.StageName}, Spec: stagecoachv1.StageSpec{
		Service: service, Environment: GitOpsLane, Author: localstack.AdminAuthor(),
		ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: d.StageName},
		Source:   stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: upstream}},
		Promotion: &stagecoachv1.PromotionPolicy{Auto: true, Git: &stagecoachv1.GitPromotion{URL: d.Repo.URL, Insecure: true, Branch: "env/prod",
			SecretRef: &stagecoachv1.LocalObjectReference{Name: d.StageName + "-push"},
			Set:       []stagecoachv1.GitFileEdit{{Path: overlay, Key: "data.digest"}},
			PullRequest: &stagecoachv1.GitPullRequest{Provider: "Gitea", TokenSecretRef: stagecoachv1.LocalObjectReference{Name: d.StageName + "-token"},
				Merge: stagecoachv1.PullRequestMergeAuto}}},
		Verification: &stagecoachv1.VerificationPolicy{Grace: &metav1.Duration{Duration: time.Second}}}}
	if err := s.Client.Create(ctx, st); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("failed to create Stage %s/%s: %w", namespace, st.Name, err)
	}
	return d, nil
}

// Stage reads the delivery's Stage (env is GitOpsLane).
func (d *PullRequestDelivery) Stage(ctx context.Context, _ string) (*stagecoachv1.Stage, error) {
	st := &stagecoachv1.Stage{}
	if err := d.Stack.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.StageName}, st); err != nil {
		return nil, err
	}
	return st, nil
}

// PullRequestOf is the pull request and the merge commit of the Promotion that verified digest.
func (d *PullRequestDelivery) PullRequestOf(ctx context.Context, digest string) (*stagecoachv1.PullRequestReference, *stagecoachv1.PushedCommit, error) {
	var list stagecoachv1.PromotionList
	if err := d.Stack.Client.List(ctx, &list, client.InNamespace(d.Namespace)); err != nil {
		return nil, nil, err
	}
	for _, p := range list.Items {
		if p.Spec.Stage == d.StageName && p.Status.Phase == stagecoachv1.PhaseSucceeded && p.Status.Version != nil && p.Status.Version.Digest == digest {
			return p.Status.PullRequest, p.Status.Commit, nil
		}
	}
	return nil, nil, fmt.Errorf("no Promotion of %s verified %s", d.StageName, digest)
}
