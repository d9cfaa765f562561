package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("failed to read golden file %s (go test -update writes it): %v", path, err)
	}
	NewWithT(t).Expect(got).To(Equal(string(want)), "output differs from %s (go test -update rewrites it)", path)
}

var t0 = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

func at(min int) *metav1.Time {
	t := metav1.NewTime(t0.Add(time.Duration(min) * time.Minute))
	return &t
}

func newScheme(t *testing.T) *runtime.Scheme {
	scheme := runtime.NewScheme()
	if err := stagecoachv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

const (
	digest1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	digest2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// fixtureStage is a Stage of the service its name starts with (payments-dev: payments).
func fixtureStage(name, env, upstream string) *stagecoachv1.Stage {
	s := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
		Spec: stagecoachv1.StageSpec{Service: strings.Split(name, "-")[0], Environment: env}}
	if upstream != "" {
		s.Spec.Source.Upstream = &stagecoachv1.UpstreamSource{Stage: upstream}
	}
	return s
}

// fixturePromotion is a Promotion created at minute created that went through each phase at
// the given minutes (-1: not reached).
func fixturePromotion(name, stage string, action stagecoachv1.PromotionAction, digest, tag string, phase stagecoachv1.Phase,
	created, started, applied, landed, verified, finished int) *stagecoachv1.Promotion {
	p := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID(name), CreationTimestamp: *at(created)},
		Spec: stagecoachv1.PromotionSpec{Stage: stage, Action: action, RequestedBy: "alice@example.com",
			Version: &stagecoachv1.VersionReference{Digest: digest, Tag: tag}},
		Status: stagecoachv1.PromotionStatus{Phase: phase, Version: &stagecoachv1.VersionReference{Digest: digest, Tag: tag}}}
	for _, ts := range []struct {
		min int
		to  **metav1.Time
	}{{started, &p.Status.StartedAt}, {applied, &p.Status.AppliedAt}, {landed, &p.Status.LandedAt},
		{verified, &p.Status.VerifiedAt}, {finished, &p.Status.FinishedAt}} {
		if ts.min >= 0 {
			*ts.to = at(ts.min)
		}
	}
	return p
}
