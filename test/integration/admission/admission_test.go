// Package admission installs manifests/policies on a real API server and checks, with impersonated
// users, that only Stagecoach's service account or the break-glass group change what a labelled
// Argo CD Application runs, while everyone's other writes (Argo CD's status writes among them) pass.
package admission

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

const (
	controllerSA = "system:serviceaccount:stagecoach-system:stagecoach-controller"
	argoCDSA     = "system:serviceaccount:argocd:argocd-application-controller"
	argoServerSA = "system:serviceaccount:argocd:argocd-server"
	appSetSA     = "system:serviceaccount:argocd:argocd-applicationset-controller"
	gcSA         = "system:serviceaccount:kube-system:generic-garbage-collector"
	ns           = "default"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start(testenv.ArgoCDCRDs, testenv.FluxCRDs)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "failed to stop the test API server:", err)
	}
	os.Exit(code)
}

// applyManifests creates every object of a multi-document YAML file, each changed by mutate
// first when given.
func applyManifests(t *testing.T, path string, mutate ...func(*unstructured.Unstructured)) {
	t.Helper()
	data, err := os.ReadFile(path)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		obj := &unstructured.Unstructured{}
		NewWithT(t).Expect(utilyaml.Unmarshal(doc, &obj.Object)).To(Succeed())
		if len(obj.Object) == 0 {
			continue
		}
		for _, m := range mutate {
			m(obj)
		}
		// Another test of this suite may have applied the same file.
		if err := env.Client.Create(t.Context(), obj); !apierrors.IsAlreadyExists(err) {
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
		}
	}
}

// grantEveryone lets every authenticated user do what the rule allows, so that only the admission
// policies under test refuse anything.
func grantEveryone(t *testing.T, name string, rule rbacv1.PolicyRule) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(env.Client.Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{rule}})).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"}},
	})).To(Succeed())
}

// as returns a client that acts as the user in the groups, through impersonation.
func as(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	return env.ClientAs(t, user, groups...)
}

func application(name string, plugin bool) *unstructured.Unstructured {
	source := map[string]any{"repoURL": "oci://registry.example/deploy/payments", "path": ".", "targetRevision": "sha256:aaaa"}
	if plugin {
		source = map[string]any{"repoURL": "https://git.example/payments.git", "path": "app", "targetRevision": "main",
			"plugin": map[string]any{"name": "stagecoach", "env": []any{map[string]any{"name": "STAGECOACH_DIGEST", "value": "sha256:aaaa"}}}}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"project": "default", "source": source,
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns},
		"syncPolicy":  map[string]any{"automated": map[string]any{}},
	}}}
	u.SetAPIVersion("argoproj.io/v1alpha1")
	u.SetKind("Application")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(map[string]string{"stagecoach.dev/stage": name})
	return u
}

func TestApplicationGuard(t *testing.T) {
	g := NewWithT(t)
	// Everyone in the test may write Applications as far as RBAC goes: the policy is what refuses.
	grantEveryone(t, "application-writer", rbacv1.PolicyRule{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications"},
		Verbs: []string{"get", "list", "create", "update", "patch", "delete"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "application-guard.yaml"))

	alice := as(t, "alice", "developers")
	stagecoach := as(t, controllerSA, "system:serviceaccounts")
	breakGlass := as(t, "bob", "stagecoach:break-glass")
	argocd := as(t, argoCDSA, "system:serviceaccounts")
	argoServer := as(t, argoServerSA, "system:serviceaccounts")
	appSet := as(t, appSetSA, "system:serviceaccounts")
	gc := as(t, gcSA, "system:serviceaccounts")

	// The policy takes a moment to be enforced after it is created.
	// A fresh name per try: a probe created before enforcement must not turn into AlreadyExists.
	probes := 0
	g.Eventually(func() error {
		probes++
		return alice.Create(t.Context(), application(fmt.Sprintf("probe-%d", probes), false))
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(MatchRegexp(
		`only Stagecoach may create Stagecoach-managed Application probe-\d+ \(user alice\)`)))

	g.Expect(stagecoach.Create(t.Context(), application("payments", false))).To(Succeed())
	g.Expect(stagecoach.Create(t.Context(), application("billing", true))).To(Succeed())
	// The applicationset-controller creates the Applications its template (with the label) generates,
	// owned by their ApplicationSet.
	generated, controls := application("payments-eu", false), true
	generated.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: "payments",
		UID: "00000000-0000-0000-0000-0000000000e5", Controller: &controls}})
	g.Expect(appSet.Create(t.Context(), generated)).To(Succeed())
	g.Expect(stagecoach.Create(t.Context(), application("collected", false))).To(Succeed())

	type change struct {
		name    string
		who     client.Client
		app     string
		mutate  func(u *unstructured.Unstructured)
		delete  bool
		wantErr string
	}
	setRevision := func(rev string) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, rev, "spec", "source", "targetRevision")
		}
	}
	setSource := func(value any, field ...string) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, value, append([]string{"spec", "source"}, field...)...)
		}
	}
	setOperation := func(sync map[string]any) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			u.Object["operation"] = map[string]any{"initiatedBy": map[string]any{"username": "alice"}, "sync": sync}
		}
	}
	cases := []change{
		{name: "a user changes targetRevision", who: alice, app: "payments", mutate: setRevision("sha256:bbbb"),
			wantErr: "targetRevision of Stagecoach-managed Application payments may only be changed by Stagecoach; alice tried sha256:aaaa -> sha256:bbbb"},
		{name: "a user changes the plugin's digest", who: alice, app: "billing", mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "STAGECOACH_DIGEST", "value": "sha256:bbbb"}}, "spec", "source", "plugin", "env")
		}, wantErr: "the Stagecoach plugin env of Application billing may only be changed by Stagecoach; alice tried STAGECOACH_DIGEST=sha256:aaaa -> STAGECOACH_DIGEST=sha256:bbbb"},
		{name: "a user removes the label", who: alice, app: "payments", mutate: func(u *unstructured.Unstructured) { u.SetLabels(nil) },
			wantErr: "the stagecoach.dev/stage label of Application payments may only be removed or changed by Stagecoach (user alice)"},
		{name: "a user relabels it", who: alice, app: "payments", mutate: func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"stagecoach.dev/stage": "other"})
		}, wantErr: "may only be removed or changed by Stagecoach"},
		{name: "a user annotates it", who: alice, app: "payments", mutate: func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"team": "payments"})
		}},
		{name: "a user adds plugin env", who: alice, app: "billing", mutate: func(u *unstructured.Unstructured) {
			env, _, _ := unstructured.NestedSlice(u.Object, "spec", "source", "plugin", "env")
			_ = unstructured.SetNestedSlice(u.Object, append(env, map[string]any{"name": "REGION", "value": "eu"}), "spec", "source", "plugin", "env")
		}, wantErr: "spec.source of Stagecoach-managed Application billing decide what runs and may only be changed by Stagecoach (user alice)"},
		{name: "a user sets plugin parameters", who: alice, app: "billing",
			mutate:  setSource([]any{map[string]any{"name": "images", "array": []any{"app:v2"}}}, "plugin", "parameters"),
			wantErr: "spec.source of Stagecoach-managed Application billing decide what runs"},
		{name: "a user sets kustomize images", who: alice, app: "payments", mutate: setSource([]any{"app=app:v2"}, "kustomize", "images"),
			wantErr: "spec.source of Stagecoach-managed Application payments decide what runs"},
		{name: "a user points repoURL elsewhere", who: alice, app: "payments", mutate: setSource("oci://evil.example/payments", "repoURL"),
			wantErr: "spec.source of Stagecoach-managed Application payments decide what runs"},
		{name: "a user adds a source hydrator", who: alice, app: "payments", mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedMap(u.Object, map[string]any{
				"drySource":  map[string]any{"repoURL": "https://git.example/evil.git", "targetRevision": "main", "path": "app"},
				"syncSource": map[string]any{"targetBranch": "env/prod", "path": "app"}}, "spec", "sourceHydrator")
		}, wantErr: "spec.sourceHydrator of Stagecoach-managed Application payments decide what runs"},
		{name: "a user ignores differences in the image", who: alice, app: "payments", mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"group": "apps", "kind": "Deployment",
				"jsonPointers": []any{"/spec/template/spec/containers/0/image"}}}, "spec", "ignoreDifferences")
		}, wantErr: "spec.ignoreDifferences of Stagecoach-managed Application payments decide what runs"},
		{name: "a user syncs another revision", who: alice, app: "payments", mutate: setOperation(map[string]any{"revision": "sha256:eeee"}),
			wantErr: "Stagecoach-managed Application payments may only sync its own source at its own targetRevision: operation.sync.revision sha256:eeee would decide what runs, and only Stagecoach or a break-glass member may set that (user alice)"},
		{name: "a user syncs another repository", who: alice, app: "payments", mutate: setOperation(map[string]any{
			"source": map[string]any{"repoURL": "oci://evil.example/payments", "targetRevision": "sha256:eeee", "path": "."}}),
			wantErr: "may only sync its own source at its own targetRevision"},
		{name: "a user syncs what the Application says", who: alice, app: "payments", mutate: func(u *unstructured.Unstructured) {
			rev, _, _ := unstructured.NestedString(u.Object, "spec", "source", "targetRevision")
			setOperation(map[string]any{"revision": rev, "prune": true})(u)
		}},
		{name: "Argo CD clears the operation and writes status", who: argocd, app: "payments", mutate: func(u *unstructured.Unstructured) {
			delete(u.Object, "operation")
			_ = unstructured.SetNestedMap(u.Object, map[string]any{"status": "Healthy"}, "status", "health")
		}},
		{name: "Argo CD starts an automated sync", who: argocd, app: "payments", mutate: func(u *unstructured.Unstructured) {
			rev, _, _ := unstructured.NestedString(u.Object, "spec", "source", "targetRevision")
			u.Object["operation"] = map[string]any{"initiatedBy": map[string]any{"automated": true}, "sync": map[string]any{"revision": rev}}
		}},
		{name: "a user fakes status", who: alice, app: "payments", mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedMap(u.Object, map[string]any{"phase": "Succeeded", "startedAt": "2026-01-01T00:00:00Z",
				"operation":  map[string]any{"sync": map[string]any{"revision": "sha256:ffff"}},
				"syncResult": map[string]any{"revision": "sha256:ffff"}}, "status", "operationState")
		}, wantErr: "the status of Stagecoach-managed Application payments is Argo CD's to write (user alice)"},
		{name: "argocd-server writes status for a person", who: argoServer, app: "payments", mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedMap(u.Object, map[string]any{"phase": "Terminating", "startedAt": "2026-01-01T00:00:00Z",
				"operation": map[string]any{"sync": map[string]any{}}}, "status", "operationState")
		}},
		{name: "a user deletes it", who: alice, app: "payments", delete: true,
			wantErr: "Stagecoach-managed Application payments may only be deleted by Stagecoach or a break-glass member (user alice)"},
		// Issue 37 item 2a: a template change reaches a labelled Application only through Stagecoach or break-glass.
		{name: "the applicationset-controller changes the template's path", who: appSet, app: "payments-eu", mutate: setSource("deploy", "path"),
			wantErr: "spec.source of Stagecoach-managed Application payments-eu decide what runs and may only be changed by Stagecoach (user " + appSetSA + ")"},
		{name: "the applicationset-controller resets the digest", who: appSet, app: "payments-eu", mutate: setRevision("1.4.2"),
			wantErr: "targetRevision of Stagecoach-managed Application payments-eu may only be changed by Stagecoach"},
		{name: "the applicationset-controller drops the label", who: appSet, app: "payments-eu", mutate: func(u *unstructured.Unstructured) { u.SetLabels(nil) },
			wantErr: "may only be removed or changed by Stagecoach"},
		{name: "the applicationset-controller deletes a generated Application", who: appSet, app: "payments-eu", delete: true},
		{name: "the garbage collector deletes an Application", who: gc, app: "collected", delete: true},
		{name: "Stagecoach promotes", who: stagecoach, app: "payments", mutate: setRevision("sha256:cccc")},
		{name: "break-glass promotes", who: breakGlass, app: "payments", mutate: setRevision("sha256:dddd")},
		{name: "break-glass removes the label", who: breakGlass, app: "billing", mutate: func(u *unstructured.Unstructured) { u.SetLabels(nil) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("argoproj.io/v1alpha1")
			u.SetKind("Application")
			g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: tc.app}, u)).To(Succeed())
			before := u.DeepCopy()
			var err error
			if tc.delete {
				err = tc.who.Delete(t.Context(), u)
			} else {
				tc.mutate(u)
				err = tc.who.Update(t.Context(), u)
			}
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			after := before.DeepCopy()
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(before), after)).To(Succeed())
			g.Expect(after.Object["spec"]).To(Equal(before.Object["spec"]))
			// Either may be absent (nil), which Equal refuses to compare.
			g.Expect(reflect.DeepEqual(after.Object["operation"], before.Object["operation"])).To(BeTrue(), "operation changed")
			g.Expect(reflect.DeepEqual(after.Object["status"], before.Object["status"])).To(BeTrue(), "status changed")
			g.Expect(after.GetLabels()).To(Equal(before.GetLabels()))
		})
	}
}
