package waves

import (
	"os"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

const exampleDir = "../../manifests/argocd/applicationset-waves/"

// TestExamples keeps manifests/argocd/applicationset-waves true: the Stage decodes without unknown
// fields and its waves plan a 16-cluster fleet as its comments say; the ApplicationSet ignores the
// fields Stagecoach writes and preserves its annotations.
func TestExamples(t *testing.T) {
	cases := []struct {
		name  string
		check func(g *WithT)
	}{
		{name: "stage.yaml plans a fleet as its comments say", check: func(g *WithT) {
			data, err := os.ReadFile(exampleDir + "stage.yaml")
			g.Expect(err).NotTo(HaveOccurred())
			var stage v1alpha1.Stage
			g.Expect(yaml.UnmarshalStrict(data, &stage)).To(Succeed())
			g.Expect(stage.Spec.ApplyRef.Kind).To(Equal("ApplicationSet"))
			targets := fleet("eu-west-1", 4, "eu-central-1", 4, "us-east-1", 4, "ap-south-1", 4)
			d := Schedule(Input{Stage: stage.Name, Digest: d1, Targets: targets, Waves: stage.Spec.Waves, Now: t0})
			g.Expect(d.Refused).To(BeFalse(), d.Message)
			g.Expect(regionsOf(targets, d.Plan[0].Targets)).To(Equal([]string{"eu-west-1"}))
			g.Expect(regionsOf(targets, d.Plan[1].Targets)).To(ConsistOf("eu-central-1", "us-east-1", "ap-south-1"))
			g.Expect(d.Plan[2].Targets).To(HaveLen(12))
			g.Expect(d.Plan[2].MaxParallel).To(Equal(3))
			g.Expect(d.Plan[2].MaxFailures).To(Equal(0), "5% of 12, rounded down")
		}},
		{name: "applicationset.yaml ignores what Stagecoach writes, keeps its annotations and labels what it generates", check: func(g *WithT) {
			data, err := os.ReadFile(exampleDir + "applicationset.yaml")
			g.Expect(err).NotTo(HaveOccurred())
			var appSet struct {
				Metadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
				Spec struct {
					Template struct {
						Metadata struct {
							Labels map[string]string `json:"labels"`
						} `json:"metadata"`
					} `json:"template"`
					IgnoreApplicationDifferences []struct {
						JSONPointers []string `json:"jsonPointers"`
					} `json:"ignoreApplicationDifferences"`
					PreservedFields struct {
						Annotations []string `json:"annotations"`
					} `json:"preservedFields"`
					Strategy any `json:"strategy"`
				} `json:"spec"`
			}
			g.Expect(yaml.Unmarshal(data, &appSet)).To(Succeed())
			g.Expect(appSet.Spec.IgnoreApplicationDifferences).To(HaveLen(1))
			g.Expect(appSet.Spec.IgnoreApplicationDifferences[0].JSONPointers).To(ConsistOf("/spec/source/targetRevision", "/spec/source/plugin/env"))
			g.Expect(appSet.Spec.PreservedFields.Annotations).To(ConsistOf(v1alpha1.VersionAnnotation, v1alpha1.PromotionAnnotation, v1alpha1.PhaseAnnotation, v1alpha1.AppliedAtAnnotation))
			g.Expect(appSet.Spec.Strategy).To(BeNil(), "RollingSync would order the same Applications")
			// The application guard protects the generated Applications only when they carry the label.
			g.Expect(appSet.Spec.Template.Metadata.Labels).To(HaveKeyWithValue(v1alpha1.StageLabel, appSet.Metadata.Labels[v1alpha1.StageLabel]))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.check(NewWithT(t)) })
	}
}
