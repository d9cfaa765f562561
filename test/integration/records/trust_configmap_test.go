package records

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
)

// prod's controller takes its trust config from a ConfigMap (--upstream-trust=configmap:NS/NAME)
// and follows its changes: missing, a key that signed nothing, the recorder's key, then invalid.
func TestTrustFromConfigMap(t *testing.T) {
	g := NewWithT(t)
	v1 := pushVersion(t, "c1")
	nsA, nsB, _ := pipeline(t)
	other, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte(keyPassword), nil })
	g.Expect(err).NotTo(HaveOccurred())
	startA(t, nil)
	start(t, envB, func(o *controller.Options) {
		o.UpstreamTrust = controller.TrustConfigMapPrefix + nsB + "/upstream-trust"
		o.UpstreamTrustRecheck = 200 * time.Millisecond
		o.UpstreamRecordsInterval = time.Second
	})
	verifyInStaging(t, nsA, "staging-v1", v1, "c1")

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "upstream-trust"}}
	set := func(g Gomega, doc string) {
		cm.Data = map[string]string{controller.TrustConfigMapKey: doc}
		if cm.ResourceVersion == "" {
			g.Expect(envB.Client.Create(t.Context(), cm)).To(Succeed())
		} else {
			g.Expect(envB.Client.Update(t.Context(), cm)).To(Succeed())
		}
	}
	steps := []struct {
		name   string
		doc    string
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		{name: "missing", status: metav1.ConditionFalse, reason: stagecoachv1.ReasonUpstreamUntrusted,
			msg: "upstream trust ConfigMap " + nsB + "/upstream-trust (--upstream-trust) does not exist"},
		{name: "a key that signed nothing", doc: trustDoc(map[string][]byte{"other": other.PublicBytes}),
			status: metav1.ConditionTrue, reason: stagecoachv1.ReasonApplierReady, msg: "2 upstream record(s) skipped"},
		{name: "the recorder's key", doc: trustDoc(map[string][]byte{"staging-recorder": recorderKey.PublicBytes}),
			status: metav1.ConditionTrue, reason: stagecoachv1.ReasonApplierReady},
		{name: "invalid", doc: "keys: [{name: staging-recorder}]", status: metav1.ConditionFalse, reason: stagecoachv1.ReasonUpstreamUntrusted,
			msg: "key upstream-trust.yaml is invalid: upstream trust config keys[0] (name \"staging-recorder\"): publicKey is empty"},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			g := NewWithT(t)
			if step.doc != "" {
				set(g, step.doc)
			}
			prod := eventuallyReady(t, nsB, step.status, step.reason, step.msg)
			switch step.name {
			case "a key that signed nothing", "missing":
				g.Expect(prod.Status.Current).To(BeNil(), "nothing is taken")
			case "the recorder's key":
				followed(t, nsB, v1, 2)
			}
		})
	}
}
