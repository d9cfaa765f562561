package plan

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestActiveFreezes(t *testing.T) {
	later := metav1.NewTime(t0.Add(time.Hour))
	earlier := metav1.NewTime(t0.Add(-time.Second))
	freeze := func(ns, name string, spec stagecoachv1.FreezeSpec) stagecoachv1.Freeze {
		spec.Reason = "quarter end"
		return stagecoachv1.Freeze{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	}
	payments := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "payments"}}
	cases := []struct {
		name     string
		freezes  []stagecoachv1.Freeze
		nsLabels map[string]string
		want     []string
	}{
		{name: "same namespace, empty selector: every Stage", freezes: []stagecoachv1.Freeze{freeze("prod", "all", stagecoachv1.FreezeSpec{})}, want: []string{"all"}},
		{name: "another namespace without namespaceSelector", freezes: []stagecoachv1.Freeze{freeze("dev", "all", stagecoachv1.FreezeSpec{})}},
		{name: "label selector matches", freezes: []stagecoachv1.Freeze{freeze("prod", "pay", stagecoachv1.FreezeSpec{Selector: payments})}, want: []string{"pay"}},
		{name: "label selector does not match", freezes: []stagecoachv1.Freeze{
			freeze("prod", "db", stagecoachv1.FreezeSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}}})}},
		{name: "cluster-wide by namespace labels", nsLabels: map[string]string{"env": "prod"}, freezes: []stagecoachv1.Freeze{
			freeze("platform", "prod-envs", stagecoachv1.FreezeSpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}),
			freeze("platform", "dev-envs", stagecoachv1.FreezeSpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}})},
			want: []string{"prod-envs"}},
		{name: "empty namespaceSelector: every namespace", freezes: []stagecoachv1.Freeze{
			freeze("platform", "everything", stagecoachv1.FreezeSpec{NamespaceSelector: &metav1.LabelSelector{}})}, want: []string{"everything"}},
		{name: "cluster-wide from another namespace than the controller's is ignored", freezes: []stagecoachv1.Freeze{
			freeze("team-b", "everything", stagecoachv1.FreezeSpec{NamespaceSelector: &metav1.LabelSelector{}})}},
		{name: "ended", freezes: []stagecoachv1.Freeze{freeze("prod", "old", stagecoachv1.FreezeSpec{Until: &earlier})}},
		{name: "not ended yet", freezes: []stagecoachv1.Freeze{freeze("prod", "soon", stagecoachv1.FreezeSpec{Until: &later})}, want: []string{"soon"}},
		{name: "a broken selector holds", freezes: []stagecoachv1.Freeze{freeze("prod", "broken", stagecoachv1.FreezeSpec{
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}})}, want: []string{"broken"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "payments", Labels: map[string]string{"tier": "payments"}}}
			got := []string{}
			for _, f := range ActiveFreezes(stage, tc.nsLabels, tc.freezes, "platform", t0) {
				got = append(got, f.Name)
			}
			if tc.want == nil {
				tc.want = []string{}
			}
			NewWithT(t).Expect(got).To(Equal(tc.want))
		})
	}
}

func TestFreezeBlocks(t *testing.T) {
	until := metav1.NewTime(t0.Add(time.Hour))
	blocks := FreezeBlocks([]stagecoachv1.Freeze{{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "q4"},
		Spec: stagecoachv1.FreezeSpec{Reason: "quarter end", Until: &until}}})
	g := NewWithT(t)
	g.Expect(blocks).To(HaveLen(1))
	g.Expect(blocks[0].Gate).To(Equal(stagecoachv1.GateFreeze))
	g.Expect(blocks[0].Message).To(Equal("Freeze prod/q4 (quarter end) holds it until 2026-11-30T13:00:00Z"))
	g.Expect(blocks[0].Until).To(Equal(&until))
}

func TestFrozenByFreezes(t *testing.T) {
	freeze := stagecoachv1.Freeze{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "q4"}, Spec: stagecoachv1.FreezeSpec{Reason: "quarter end"}}
	cond := func(reason string, status metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: stagecoachv1.ConditionFrozen, Status: status, Reason: reason}}
	}
	for _, tc := range []struct {
		name       string
		conditions []metav1.Condition
		freezes    []stagecoachv1.Freeze
		wantStatus metav1.ConditionStatus // "" when the condition stays as it is
		wantReason string
	}{
		{name: "a Freeze holds a Stage that was not frozen", freezes: []stagecoachv1.Freeze{freeze},
			wantStatus: metav1.ConditionTrue, wantReason: stagecoachv1.ReasonFrozen},
		{name: "a foreign write's freeze comes first", conditions: cond(stagecoachv1.ReasonForeignWrite, metav1.ConditionTrue),
			freezes: []stagecoachv1.Freeze{freeze}},
		{name: "the Freeze ended", conditions: cond(stagecoachv1.ReasonFrozen, metav1.ConditionTrue),
			wantStatus: metav1.ConditionFalse, wantReason: stagecoachv1.ReasonUnfrozen},
		{name: "never held, still not", conditions: nil},
		{name: "unfrozen by a person stays so", conditions: cond(stagecoachv1.ReasonUnfrozen, metav1.ConditionFalse)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			stage := &stagecoachv1.Stage{Status: stagecoachv1.StageStatus{Conditions: tc.conditions}}
			got := FrozenByFreezes(stage, tc.freezes)
			if tc.wantStatus == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got.Status).To(Equal(tc.wantStatus))
			g.Expect(got.Reason).To(Equal(tc.wantReason))
			if tc.wantStatus == metav1.ConditionTrue {
				g.Expect(got.Message).To(ContainSubstring("Freeze prod/q4 (quarter end) holds it until it is deleted"))
			}
		})
	}
}
