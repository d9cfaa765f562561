package stage

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
)

// Mediated says what decides what the applier runs, in the words of the Stage's versions: a
// promotion by commit names the files it edits and says that commits to any other file run
// unjudged (issue 50 item 4); merge mode judges every commit; a Stage of commits says "commit".
func TestMediatedSaysWhatDecides(t *testing.T) {
	app := &unstructured.Unstructured{}
	app.SetKind("Application")
	gvk := schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}
	engine := applier.For(gvk.GroupKind(), applier.Options{})
	edits := &stagecoachv1.GitPromotion{URL: "https://git.example/cfg.git", Branch: "env/prod",
		Set: []stagecoachv1.GitFileEdit{{Path: "app/values.yaml", Key: "image.digest"}, {Path: "app/kustomization.yaml", Image: "web"}}}
	merge := &stagecoachv1.GitPromotion{URL: "https://git.example/cfg.git", Branch: "env/prod", Merge: true}
	for _, tc := range []struct {
		name    string
		verdict applierVerdict
		want    []string
		notWant string
	}{
		{name: "promotion by commit names the files it judges", verdict: applierVerdict{git: edits},
			want: []string{"writes the version into app/values.yaml, app/kustomization.yaml there",
				"a commit to any other file the applier syncs runs without any gate"}},
		{name: "promotion by merge judges every commit", verdict: applierVerdict{git: merge},
			want: []string{"merges each promoted commit there", "a commit by someone else on the branch freezes the Stage"}, notWant: "any other file"},
		{name: "a Stage of commits", verdict: applierVerdict{commits: true}, want: []string{"only the promoted commit decides what it runs"}},
		{name: "a Stage of digests", verdict: applierVerdict{}, want: []string{"only the promoted digest decides what it runs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			v := tc.verdict
			v.ready, v.reason, v.gvk, v.obj, v.engine = true, stagecoachv1.ReasonApplierReady, gvk, app, engine
			stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "prod"},
				Spec: stagecoachv1.StageSpec{ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: "web"}}}
			v.apply(stage)
			c := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionMediated)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			for _, w := range tc.want {
				g.Expect(c.Message).To(ContainSubstring(w))
			}
			if tc.notWant != "" {
				g.Expect(c.Message).NotTo(ContainSubstring(tc.notWant))
			}
		})
	}
}
