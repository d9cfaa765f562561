package waves

import (
	"encoding/base64"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func obj(t *testing.T, y string) unstructured.Unstructured {
	t.Helper()
	var o map[string]any
	if err := yaml.Unmarshal([]byte(y), &o); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return unstructured.Unstructured{Object: o}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// clusterSecret is an Argo CD cluster Secret as read through the API (data in base64).
func clusterSecret(t *testing.T, secret, name, server, region string) unstructured.Unstructured {
	return obj(t, fmt.Sprintf(`{apiVersion: v1, kind: Secret, metadata: {name: %s, namespace: argocd,
  labels: {argocd.argoproj.io/secret-type: cluster, region: %s}}, data: {name: %q, server: %q}}`, secret, region, b64(name), b64(server)))
}

const appSetYAML = `{apiVersion: argoproj.io/v1alpha1, kind: ApplicationSet, metadata: {name: payments, namespace: argocd, uid: u-1}}`

// application is an Application owned by the ApplicationSet payments (uid u-1) unless owner
// says otherwise, with the destination given as YAML.
func application(t *testing.T, name, dest string, owner ...string) unstructured.Unstructured {
	ref := `{apiVersion: argoproj.io/v1alpha1, kind: ApplicationSet, name: payments, uid: u-1}`
	if len(owner) > 0 {
		ref = owner[0]
	}
	ns := "argocd"
	if len(owner) > 1 {
		ns = owner[1]
	}
	return obj(t, fmt.Sprintf(`{apiVersion: argoproj.io/v1alpha1, kind: Application, metadata: {name: %s, namespace: %s, ownerReferences: [%s]},
  spec: {destination: %s}}`, name, ns, ref, dest))
}

func TestResolveTargets(t *testing.T) {
	cases := []struct {
		name         string
		apps         func(t *testing.T) []unstructured.Unstructured
		secrets      func(t *testing.T) []unstructured.Unstructured
		want         []Target
		wantProblems []string
	}{
		{
			name: "destination by server and by name, labels from the cluster Secret",
			apps: func(t *testing.T) []unstructured.Unstructured {
				return []unstructured.Unstructured{
					application(t, "p-eu", `{server: "https://eu.example:6443"}`),
					application(t, "p-us", `{name: us}`),
				}
			},
			secrets: func(t *testing.T) []unstructured.Unstructured {
				return []unstructured.Unstructured{
					clusterSecret(t, "cluster-eu", "eu", "https://eu.example:6443", "eu-west-1"),
					clusterSecret(t, "cluster-us", "us", "https://us.example:6443", "us-east-1"),
				}
			},
			want: []Target{
				{Name: "p-eu", Cluster: "eu", Phase: v1alpha1.PhasePending, Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster", "region": "eu-west-1"}},
				{Name: "p-us", Cluster: "us", Phase: v1alpha1.PhasePending, Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster", "region": "us-east-1"}},
			},
		},
		{
			name: "server with a trailing slash, and name and server naming the same cluster",
			apps: func(t *testing.T) []unstructured.Unstructured {
				return []unstructured.Unstructured{
					application(t, "p-eu", `{server: "https://eu.example:6443/"}`),
					application(t, "p-eu2", `{server: "https://eu.example:6443", name: eu}`),
				}
			},
			secrets: func(t *testing.T) []unstructured.Unstructured {
				return []unstructured.Unstructured{clusterSecret(t, "cluster-eu", "eu", "https://eu.example:6443", "eu-west-1")}
			},
			want: []Target{
				{Name: "p-eu", Cluster: "eu", Phase: v1alpha1.PhasePending, Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster", "region": "eu-west-1"}},
				{Name: "p-eu2", Cluster: "eu", Phase: v1alpha1.PhasePending, Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster", "region": "eu-west-1"}},
			},
		},
		{
			name: "in-cluster counts as a cluster without a Secret, by server and by name",
			apps: func(t *testing.T) []unstructured.Unstructured {
				return []unstructured.Unstructured{
					application(t, "local-1", `{server: "https://kubernetes.default.svc"}`),
					application(t, "local-2", `{name: in-cluster}`),
				}
			},
			secrets: func(t *testing.T) []unstructured.Unstructured { return nil },
			want: []Target{
				{Name: "local-1", Cluster: "in-cluster", Phase: v1alpha1.PhasePending},
				{Name: "local-2", Cluster: "in-cluster", Phase: v1alpha1.PhasePending},
			},
		},
		{
			name: "in-cluster with a Secret takes the Secret's name and labels",
			apps: func(t *testing.T) []unstructured.Unstructured {
				return []unstructured.Unstructured{application(t, "local", `{server: "https://kubernetes.default.svc"}`)}
			},
			secrets: func(t *testing.T) []unstructured.Unstructured {
				return []unstructured.Unstructured{clusterSecret(t, "home", "home", "https://kubernetes.default.svc", "eu-west-1")}
			},
			want: []Target{{Name: "local", Cluster: "home", Phase: v1alpha1.PhasePending, Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster", "region": "eu-west-1"}}},
		},
		{
			name: "only Applications this ApplicationSet owns: not another one's, not an old one of the same name, not another namespace's",
			apps: func(t *testing.T) []unstructured.Unstructured {
				return []unstructured.Unstructured{
					application(t, "mine", `{name: in-cluster}`),
					application(t, "other-appset", `{name: in-cluster}`, `{apiVersion: argoproj.io/v1alpha1, kind: ApplicationSet, name: checkout, uid: u-2}`),
					application(t, "old-uid", `{name: in-cluster}`, `{apiVersion: argoproj.io/v1alpha1, kind: ApplicationSet, name: payments, uid: u-0}`),
					application(t, "other-kind", `{name: in-cluster}`, `{apiVersion: argoproj.io/v1alpha1, kind: Application, name: payments, uid: u-1}`),
					application(t, "other-group", `{name: in-cluster}`, `{apiVersion: example.com/v1, kind: ApplicationSet, name: payments, uid: u-1}`),
					application(t, "other-ns", `{name: in-cluster}`, `{apiVersion: argoproj.io/v1alpha1, kind: ApplicationSet, name: payments, uid: u-1}`, "team-a"),
				}
			},
			secrets: func(t *testing.T) []unstructured.Unstructured { return nil },
			want:    []Target{{Name: "mine", Cluster: "in-cluster", Phase: v1alpha1.PhasePending}},
		},
		{
			name: "unknown destinations are left out and reported with what to do",
			apps: func(t *testing.T) []unstructured.Unstructured {
				return []unstructured.Unstructured{
					application(t, "lost-server", `{server: "https://nowhere:6443"}`),
					application(t, "lost-name", `{name: nowhere}`),
					application(t, "none", `{namespace: payments}`),
					application(t, "mixed", `{name: us, server: "https://eu.example:6443"}`),
				}
			},
			secrets: func(t *testing.T) []unstructured.Unstructured {
				return []unstructured.Unstructured{
					clusterSecret(t, "cluster-eu", "eu", "https://eu.example:6443", "eu-west-1"),
					clusterSecret(t, "cluster-us", "us", "https://us.example:6443", "us-east-1"),
				}
			},
			wantProblems: []string{
				`Application argocd/lost-server: destination server "https://nowhere:6443" matches no Argo CD cluster Secret (label argocd.argoproj.io/secret-type: cluster); add the cluster to Argo CD or fix the destination`,
				`Application argocd/lost-name: destination name "nowhere" matches no Argo CD cluster Secret (label argocd.argoproj.io/secret-type: cluster); add the cluster to Argo CD or fix the destination`,
				`Application argocd/none: has no spec.destination.server or .name; set one of them in the ApplicationSet's template`,
				`Application argocd/mixed: destination name "us" and server "https://eu.example:6443" are different clusters; set only one of them`,
			},
		},
		{
			name: "Secrets that are not cluster Secrets are ignored; broken cluster Secrets are reported",
			apps: func(t *testing.T) []unstructured.Unstructured {
				return []unstructured.Unstructured{application(t, "p", `{name: eu}`)}
			},
			secrets: func(t *testing.T) []unstructured.Unstructured {
				return []unstructured.Unstructured{
					obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: repo, namespace: argocd, labels: {argocd.argoproj.io/secret-type: repository}},
  data: {name: `+b64("eu")+`, server: `+b64("https://eu.example:6443")+`}}`),
					obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: bad, namespace: argocd, labels: {argocd.argoproj.io/secret-type: cluster}}, data: {name: "%%%", server: "x"}}`),
					obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: serverless, namespace: argocd, labels: {argocd.argoproj.io/secret-type: cluster}}, stringData: {name: eu}}`),
				}
			},
			wantProblems: []string{
				`cluster Secret argocd/bad: data.name is not base64: illegal base64 data at input byte 0; fix its data`,
				`cluster Secret argocd/serverless has no server; add data.server (the cluster's API server URL)`,
				`Application argocd/p: destination name "eu" matches no Argo CD cluster Secret (label argocd.argoproj.io/secret-type: cluster); add the cluster to Argo CD or fix the destination`,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			appSet := obj(t, appSetYAML)
			got, problems := ResolveTargets(&appSet, tc.apps(t), tc.secrets(t))
			g.Expect(got).To(Equal(tc.want))
			g.Expect(problems).To(Equal(tc.wantProblems))
		})
	}
}

// TestResolveThenSchedule selects by the labels the Secrets carry: the wave over eu-west-1 gets
// only the Application whose destination is that cluster.
func TestResolveThenSchedule(t *testing.T) {
	cases := []struct {
		name string
		want []string
	}{{name: "the eu-west-1 wave takes the Application deployed there", want: []string{"p-eu"}}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			appSet := obj(t, appSetYAML)
			targets, problems := ResolveTargets(&appSet,
				[]unstructured.Unstructured{application(t, "p-us", `{name: us}`), application(t, "p-eu", `{server: "https://eu.example:6443"}`)},
				[]unstructured.Unstructured{
					clusterSecret(t, "cluster-eu", "eu", "https://eu.example:6443", "eu-west-1"),
					clusterSecret(t, "cluster-us", "us", "https://us.example:6443", "us-east-1"),
				})
			g.Expect(problems).To(BeEmpty())
			d := Schedule(Input{Stage: "payments", Digest: d1, Targets: targets, Now: t0, AllowPartial: true,
				Waves: seedWaves()[:1]})
			g.Expect(d.Plan[0].Targets).To(Equal(tc.want))
		})
	}
}
