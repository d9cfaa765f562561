// Package records runs two clusters (two API servers) and one OCI registry on 127.0.0.1: staging
// in cluster A records every step to its signed stream, prod in cluster B follows it through the
// registry alone. No network path joins the two controllers.
package records

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/records"
	"github.com/stagecoach-dev/stagecoach/internal/records/trust"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

const (
	timeout  = 30 * time.Second
	interval = 50 * time.Millisecond
	// clusterA is cluster A's part of its stream ids (--records-cluster).
	clusterA    = "cluster-a"
	keyPassword = "records-test"
	widgetAPI   = "example.dev/v1"
	succeeded   = `status.conditions.#(type=="ReconcileSucceeded").status`
)

var (
	envA, envB *testenv.Env
	reg        *testRegistry
	// recorderKey is cluster A's recorder key pair (cosign.key encrypted with keyPassword).
	recorderKey *cosign.KeysBytes
	trustFile   string
)

func TestMain(m *testing.M) {
	testenv.SetLogger()
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	if envA, err = testenv.Start(testenv.StandInCRDs); err != nil {
		return 0, err
	}
	defer func() { _ = envA.Stop() }()
	if envB, err = testenv.Start(testenv.StandInCRDs); err != nil {
		return 0, err
	}
	defer func() { _ = envB.Stop() }()
	reg = newRegistry()
	defer reg.srv.Close()
	if recorderKey, err = cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte(keyPassword), nil }); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "records-trust")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	trustFile = filepath.Join(dir, "trust.yaml")
	doc := "keys:\n- name: staging-recorder\n  repositories: [\"" + reg.streams() + "\"]\n  streams: [\"" + clusterA + "/*/*\"]\n  publicKey: |\n    " +
		strings.ReplaceAll(strings.TrimSpace(string(recorderKey.PublicBytes)), "\n", "\n    ") + "\n"
	if _, err := trust.Parse([]byte(doc)); err != nil {
		return 0, fmt.Errorf("test trust config: %w", err)
	}
	if err := os.WriteFile(trustFile, []byte(doc), 0o600); err != nil {
		return 0, err
	}
	ctx := context.Background()
	if err := envA.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "stagecoach-system"}}); err != nil {
		return 0, err
	}
	if err := envA.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "stagecoach-system", Name: "recorder-key"},
		Data: map[string][]byte{"cosign.key": recorderKey.PrivateBytes, "cosign.password": []byte(keyPassword)}}); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// testRegistry is go-containerregistry's in-memory registry on 127.0.0.1 with a switch that makes
// it answer 503.
type testRegistry struct {
	srv  *httptest.Server
	down atomic.Bool
}

func newRegistry() *testRegistry {
	r := &testRegistry{}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		inner.ServeHTTP(w, req)
	}))
	return r
}

func (r *testRegistry) host() string { return strings.TrimPrefix(r.srv.URL, "http://") }

// streams is the records repository; apps the repository both clusters apply from.
func (r *testRegistry) streams() string { return r.host() + "/delivery/streams" }
func (r *testRegistry) apps() string    { return r.host() + "/deploy/payments" }

// pushVersion pushes a random image tagged tag to the apps repository and returns its digest.
func pushVersion(t *testing.T, tag string) string {
	t.Helper()
	g := NewWithT(t)
	img, err := random.Image(256, 1)
	g.Expect(err).NotTo(HaveOccurred())
	ref, err := name.NewTag(reg.apps() + ":" + tag)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Write(ref, img, remote.WithContext(t.Context()))).To(Succeed())
	d, err := img.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	return d.String()
}

// startA starts cluster A's controller with the recorder; stop ends it (also at the test's end).
func startA(t *testing.T, mutate func(*controller.Options)) (stop func()) {
	return start(t, envA, func(o *controller.Options) {
		o.RecordsRepository = reg.streams()
		o.RecordsKeySecret = "stagecoach-system/recorder-key"
		o.RecordsCluster = clusterA
		if mutate != nil {
			mutate(o)
		}
	})
}

// startB starts cluster B's controller, which trusts cluster A's recorder.
func startB(t *testing.T) (stop func()) {
	return start(t, envB, func(o *controller.Options) {
		o.UpstreamTrust = trustFile
		o.UpstreamRecordsInterval = time.Second
	})
}

func start(t *testing.T, env *testenv.Env, mutate func(*controller.Options)) func() {
	t.Helper()
	stopManager, err := env.RunManager(context.Background(), func(o *controller.Options) {
		o.ApplierRetryInterval = 500 * time.Millisecond
		o.SkipNameValidation = true
		mutate(o)
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			NewWithT(t).Expect(stopManager()).To(Succeed())
		}
	}
	t.Cleanup(stop)
	return stop
}

// newWidget creates the stand-in applier of a Stage.
func newWidget(t *testing.T, env *testenv.Env, ns, name string) {
	t.Helper()
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": widgetAPI, "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{stagecoachv1.StageLabel: name}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.example/shop:old"}}},
	}}
	NewWithT(t).Expect(env.Client.Create(t.Context(), w)).To(Succeed())
}

// land plays the Widget's controller once the Widget runs digest: it reports the generation
// observed, succeeded or not.
func land(t *testing.T, env *testenv.Env, ns, name, digest string, ok bool) {
	t.Helper()
	status := "True"
	if !ok {
		status = "False"
	}
	NewWithT(t).Eventually(func(g Gomega) {
		w := &unstructured.Unstructured{}
		w.SetAPIVersion(widgetAPI)
		w.SetKind("Widget")
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, w)).To(Succeed())
		image, _, _ := unstructured.NestedString(w.Object, "spec", "containers", "0", "image")
		containers, _, _ := unstructured.NestedSlice(w.Object, "spec", "containers")
		if len(containers) > 0 {
			image, _ = containers[0].(map[string]any)["image"].(string)
		}
		g.Expect(image).To(HaveSuffix("@" + digest))
		w.Object["status"] = map[string]any{"observedGeneration": w.GetGeneration(),
			"conditions": []any{map[string]any{"type": "ReconcileSucceeded", "status": status}}}
		g.Expect(env.Client.Status().Update(t.Context(), w)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

func widgetStage(ns, name string, source stagecoachv1.StageSource, auto bool) *stagecoachv1.Stage {
	grace := metav1.Duration{Duration: time.Second}
	noRollback := false
	return &stagecoachv1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stagecoachv1.StageSpec{
			Service: "payments", Environment: name,
			// The suites' admins write the Stages; their rights come from system:masters.
			Author: &stagecoachv1.StageAuthor{User: "admin", Groups: []string{"system:masters"}},
			ApplyRef: stagecoachv1.ApplierReference{APIVersion: widgetAPI, Kind: "Widget", Name: name,
				Set: []stagecoachv1.FieldSetting{{Path: "/spec/containers/0/image", Value: "registry.example/shop@{{ .Digest }}"}}},
			Completion: &stagecoachv1.CompletionRules{ObservedCompletion: &stagecoachv1.ObservedCompletion{
				Succeeded: &stagecoachv1.FieldMatch{Key: succeeded, Value: "True"},
				Failed:    &stagecoachv1.FieldMatch{Key: succeeded, Value: "False"},
			}},
			Source:       source,
			Promotion:    &stagecoachv1.PromotionPolicy{Auto: auto},
			Verification: &stagecoachv1.VerificationPolicy{Grace: &grace},
			Rollback:     &stagecoachv1.RollbackPolicy{Automatic: &noRollback},
		},
	}
}

// pipeline creates staging in cluster A (promoted by hand, recording) and prod in cluster B
// (following staging's stream automatically), each with its Widget; it returns the namespaces
// and staging's stream id.
func pipeline(t *testing.T) (nsA, nsB, stream string) {
	t.Helper()
	return pipelineWith(t, nil)
}

// pipelineWith is pipeline with prod changed by follower before it is created.
func pipelineWith(t *testing.T, follower func(prod *stagecoachv1.Stage)) (nsA, nsB, stream string) {
	t.Helper()
	g := NewWithT(t)
	nsA, nsB = envA.NewNamespace(t, "stg"), envB.NewNamespace(t, "prod")
	newWidget(t, envA, nsA, "staging")
	newWidget(t, envB, nsB, "prod")
	// staging's source never offers anything: it is promoted by hand.
	placeholder := widgetStage(nsA, "none", stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}}, false)
	g.Expect(envA.Client.Create(t.Context(), placeholder)).To(Succeed())
	g.Expect(envA.Client.Create(t.Context(), widgetStage(nsA, "staging",
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}}, false))).To(Succeed())
	stream = clusterA + "/" + nsA + "/staging"
	prod := widgetStage(nsB, "prod", stagecoachv1.StageSource{UpstreamRecords: &stagecoachv1.UpstreamRecordsSource{
		Repository: reg.streams(), Stream: stream, ApplyRepository: reg.apps()}}, true)
	if follower != nil {
		follower(prod)
	}
	g.Expect(envB.Client.Create(t.Context(), prod)).To(Succeed())
	return nsA, nsB, stream
}

func promote(t *testing.T, env *testenv.Env, ns, name, stage, digest, tag string, mutate func(*stagecoachv1.Promotion)) {
	t.Helper()
	p := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stagecoachv1.PromotionSpec{Stage: stage, Action: stagecoachv1.ActionPromote, RequestedBy: "alice",
			Version: &stagecoachv1.VersionReference{Digest: digest, Tag: tag}}}
	if mutate != nil {
		mutate(p)
	}
	NewWithT(t).Expect(env.Client.Create(t.Context(), p)).To(Succeed())
}

func getPromotion(g Gomega, t *testing.T, env *testenv.Env, ns, name string) *stagecoachv1.Promotion {
	p := &stagecoachv1.Promotion{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
	return p
}

func getStage(g Gomega, t *testing.T, env *testenv.Env, ns, name string) *stagecoachv1.Stage {
	s := &stagecoachv1.Stage{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	return s
}

// eventuallyRecorded waits for a Promotion of cluster A to be recorded up to action, and returns it.
func eventuallyRecorded(t *testing.T, ns, name string, phase stagecoachv1.Phase, action records.Action) *stagecoachv1.Promotion {
	t.Helper()
	var p *stagecoachv1.Promotion
	NewWithT(t).Eventually(func(g Gomega) {
		p = getPromotion(g, t, envA, ns, name)
		g.Expect(p.Status.Phase).To(Equal(phase), p.Status.Message)
		g.Expect(p.Status.Record).NotTo(BeNil())
		g.Expect(p.Status.Record.Action).To(Equal(string(action)))
		g.Expect(p.Status.Recording).To(BeNil())
	}, timeout, interval).Should(Succeed())
	return p
}

// eventuallyReady waits for prod's Ready condition to match.
func eventuallyReady(t *testing.T, ns string, status metav1.ConditionStatus, reason, msg string) *stagecoachv1.Stage {
	t.Helper()
	var s *stagecoachv1.Stage
	NewWithT(t).Eventually(func(g Gomega) {
		s = getStage(g, t, envB, ns, "prod")
		c := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(status), c.Message)
		g.Expect(c.Reason).To(Equal(reason), c.Message)
		g.Expect(c.Message).To(ContainSubstring(msg))
	}, timeout, interval).Should(Succeed())
	return s
}

// audit reads the whole stream as an auditor would, with the suite's trust config.
func audit(t *testing.T, stream string) *records.Audit {
	t.Helper()
	return auditWith(t, trustFile, stream)
}

// auditWith reads the whole stream with the trust config at path.
func auditWith(t *testing.T, path, stream string) *records.Audit {
	t.Helper()
	g := NewWithT(t)
	store, err := records.NewStore(reg.streams(), ociclient.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	tc, err := trust.Parse(data)
	g.Expect(err).NotTo(HaveOccurred())
	a, err := records.AuditStream(t.Context(), store, tc, stream)
	g.Expect(err).NotTo(HaveOccurred())
	return a
}

// promotionsOf lists a Stage's Promotions in a cluster.
func promotionsOf(g Gomega, t *testing.T, env *testenv.Env, ns string) []stagecoachv1.Promotion {
	var list stagecoachv1.PromotionList
	g.Expect(env.Client.List(t.Context(), &list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}
