package promotion

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

// A deleted Stage's attestation backoff goes with it; another Stage's stays.
func TestForgetStageDropsItsAttestationBackoff(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deleted  types.NamespacedName
		wantKept bool
	}{
		{name: "the deleted Stage's count goes", deleted: types.NamespacedName{Namespace: "prod", Name: "payments"}},
		{name: "another Stage's deletion keeps it", deleted: types.NamespacedName{Namespace: "prod", Name: "ledger"}, wantKept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			env := newStepEnv(t, stepFixture{stage: stepStage(nil), appRevision: digestV1})
			counted := types.NamespacedName{Namespace: "prod", Name: "payments"}
			env.run.r.attestFailures.Store(counted, 3)
			env.run.r.ForgetStage(tc.deleted)
			_, kept := env.run.r.attestFailures.Load(counted)
			g.Expect(kept).To(Equal(tc.wantKept))
		})
	}
}
