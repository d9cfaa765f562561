package plan

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// following is a Stage in ns named name that follows upstream (namespace/name, or a name in ns;
// "" follows a registry).
func following(ns, name, upstreamNS, upstream string) *stagecoachv1.Stage {
	s := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if upstream == "" {
		s.Spec.Source.Registry = &stagecoachv1.RegistrySource{Repository: "registry.example/payments"}
	} else {
		s.Spec.Source.Upstream = &stagecoachv1.UpstreamSource{Stage: upstream, Namespace: upstreamNS}
	}
	return s
}

// stageReader reads Stages from a map, missing ones as nil, and counts its reads.
func stageReader(reads *int, stages ...*stagecoachv1.Stage) func(types.NamespacedName) (*stagecoachv1.Stage, error) {
	byKey := map[types.NamespacedName]*stagecoachv1.Stage{}
	for _, s := range stages {
		byKey[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
	}
	return func(key types.NamespacedName) (*stagecoachv1.Stage, error) {
		*reads++
		return byKey[key], nil
	}
}

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func TestUpstreamChain(t *testing.T) {
	prod := following("shop", "prod", "", "staging")
	staging := following("shop", "staging", "dev", "payments-dev")
	dev := following("dev", "payments-dev", "", "")
	// A long chain: s0 follows s1, s1 follows s2, ..., each in shop.
	var long []*stagecoachv1.Stage
	for i := 0; i < upstreamChainLimit+5; i++ {
		long = append(long, following("shop", fmt.Sprintf("s%d", i), "", fmt.Sprintf("s%d", i+1)))
	}
	var longWant []types.NamespacedName
	for i := 1; i <= upstreamChainLimit; i++ {
		longWant = append(longWant, key("shop", fmt.Sprintf("s%d", i)))
	}
	tests := []struct {
		name   string
		stage  *stagecoachv1.Stage
		stages []*stagecoachv1.Stage
		want   []types.NamespacedName
		reads  int // at most
	}{
		{name: "a Stage following a registry has no chain", stage: dev, stages: []*stagecoachv1.Stage{dev}, reads: 0},
		{name: "two hops up, across namespaces, up to the registry", stage: prod, stages: []*stagecoachv1.Stage{prod, staging, dev},
			want: []types.NamespacedName{key("shop", "staging"), key("dev", "payments-dev")}, reads: 2},
		{name: "a missing Stage is listed, and the walk stops there", stage: prod, stages: []*stagecoachv1.Stage{prod, dev},
			want: []types.NamespacedName{key("shop", "staging")}, reads: 1},
		{name: "a Stage following itself (the suites' placeholder) ends the walk",
			stage:  following("shop", "dev", "", "none"),
			stages: []*stagecoachv1.Stage{following("shop", "none", "", "none")},
			want:   []types.NamespacedName{key("shop", "none")}, reads: 1},
		{name: "a cycle back to the Stage ends the walk",
			stage:  following("shop", "a", "", "b"),
			stages: []*stagecoachv1.Stage{following("shop", "a", "", "b"), following("shop", "b", "", "c"), following("shop", "c", "", "a")},
			want:   []types.NamespacedName{key("shop", "b"), key("shop", "c")}, reads: 2},
		{name: "a cycle above the Stage ends the walk",
			stage:  following("shop", "prod", "", "b"),
			stages: []*stagecoachv1.Stage{following("shop", "b", "", "c"), following("shop", "c", "", "b")},
			want:   []types.NamespacedName{key("shop", "b"), key("shop", "c")}, reads: 2},
		{name: "a chain longer than the limit is cut at the limit", stage: long[0], stages: long, want: longWant, reads: upstreamChainLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			reads := 0
			chain, err := UpstreamChain(tt.stage, stageReader(&reads, tt.stages...))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(chain).To(Equal(tt.want))
			g.Expect(reads).To(BeNumerically("<=", tt.reads))
		})
	}

	t.Run("a read that fails is the walk's error", func(t *testing.T) {
		g := NewWithT(t)
		boom := errors.New("cache not synced")
		_, err := UpstreamChain(prod, func(types.NamespacedName) (*stagecoachv1.Stage, error) { return nil, boom })
		g.Expect(err).To(MatchError(boom))
	})
}

// The whole rule, as the controller puts it together: the hand promoters of the Stage and of
// every Stage up its chain cannot approve the version in it, whoever carried it on between.
func TestApprovalsLeaveOutHandPromotersUpTheChain(t *testing.T) {
	const controller = "system:serviceaccount:stagecoach-system:stagecoach-controller"
	prod := following("shop", "prod", "", "staging")
	prod.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true, Approvals: &stagecoachv1.ApprovalPolicy{Required: 1}}
	staging := following("shop", "staging", "dev", "payments-dev")
	dev := following("dev", "payments-dev", "", "")
	promotion := func(ns, stage, requestedBy, digest string) stagecoachv1.Promotion {
		return stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: stage + "-" + requestedBy},
			Spec: stagecoachv1.PromotionSpec{Stage: stage, Action: stagecoachv1.ActionPromote, RequestedBy: requestedBy,
				Version: &stagecoachv1.VersionReference{Digest: digest}}}
	}
	// Promotions by Stage key, as the controller lists them.
	promotions := map[types.NamespacedName][]stagecoachv1.Promotion{
		key("dev", "payments-dev"): {promotion("dev", "payments-dev", "alice", d1), promotion("dev", "payments-dev", "dave", d2)},
		key("shop", "staging"):     {promotion("shop", "staging", controller, d1)},
	}
	tests := []struct {
		name      string
		approvers []string
		blocked   string // "" when open
	}{
		{name: "alice promoted it by hand in dev: her approval in prod does not count", approvers: []string{"alice"},
			blocked: "0 of 1 approvals for " + d1 + "; alice promoted this version by hand in dev/payments-dev and cannot approve it"},
		{name: "dave promoted another version: his approval counts", approvers: []string{"dave"}},
		{name: "bob promoted nothing: his approval counts beside alice's", approvers: []string{"alice", "bob"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			reads := 0
			chain, err := UpstreamChain(prod, stageReader(&reads, prod, staging, dev))
			g.Expect(err).NotTo(HaveOccurred())
			promoters := Promoters(d1, nil, controller) // none in prod itself
			for _, k := range chain {
				promoters = append(promoters, Promoters(d1, promotions[k], controller)...)
			}
			var approvals []stagecoachv1.Approval
			for _, a := range tt.approvers {
				approvals = append(approvals, approval(a, d1))
			}
			b := approvalBlock(prod, d1, approvals, promoters)
			if tt.blocked == "" {
				g.Expect(b).To(BeNil())
				return
			}
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Message).To(Equal(tt.blocked))
		})
	}
}
