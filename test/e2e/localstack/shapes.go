package localstack

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The apps teams already have (issue 30): Applications that an app-of-apps parent declares in Git.

// ArgoCDAppControllerSA is the identity Argo CD's application-controller has in a real install,
// which the Application guard (manifests/policies/application-guard.yaml) knows it by.
const ArgoCDAppControllerSA = "system:serviceaccount:argocd:argocd-application-controller"

// RunArgoCDAppControllerAs restarts the application-controller acting as user (by impersonation
// through the admin's token, with cluster-admin rights bound to user) instead of as the admin,
// who is in the break-glass group and so passes every guard: the guards then judge its writes as
// a real install's. restore (for t.Cleanup) brings the admin's back.
func (s *Stack) RunArgoCDAppControllerAs(ctx context.Context, user string, groups ...string) (restore func(context.Context) error, err error) {
	old := s.Process(ArgoCDAppController)
	if old == nil {
		return nil, fmt.Errorf("the application-controller is not running in this stack")
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + strings.NewReplacer(":", "-").Replace(user)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if err := s.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	kubeconfig := filepath.Join(s.Dir, "kubeconfig-"+ArgoCDAppController+"-as")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: "https://" + s.APIServer, CertificateAuthorityData: s.pki.caPEM}
	cfg.AuthInfos["as"] = &clientcmdapi.AuthInfo{Token: s.pki.adminToken, Impersonate: user, ImpersonateGroups: groups}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "as", Namespace: "default"}
	cfg.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		return nil, err
	}
	spec := old.spec
	spec.env = append(slices.Clone(spec.env), "KUBECONFIG="+kubeconfig) // the last one counts
	if _, err := s.restartAppController(ctx, old, spec); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := s.restartAppController(ctx, s.Process(ArgoCDAppController), old.spec)
		return err
	}, nil
}

// restartAppController stops p and starts the application-controller from spec, waiting for its
// metrics, as startEngines does.
func (s *Stack) restartAppController(ctx context.Context, p *Process, spec processSpec) (*Process, error) {
	i := slices.Index(spec.args, "--metrics-port")
	if i < 0 || i+1 >= len(spec.args) {
		return nil, fmt.Errorf("the application-controller was started without --metrics-port")
	}
	p.Stop()
	n, err := startProcess(s.LogDir, spec)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, n)
	start := time.Now()
	if err := n.waitReady(ctx, 60*time.Second, "GET /metrics", httpOK(nil, "http://127.0.0.1:"+spec.args[i+1]+"/metrics")); err != nil {
		return nil, err
	}
	s.step("restarted %s (pid %d) in %s", ArgoCDAppController, n.Pid(), time.Since(start).Round(time.Millisecond))
	return n, nil
}

// AppOfAppsYAML is an unlabelled, automated (selfHeal) Argo CD parent Application in namespace
// that syncs the folder path of the Git repository repoURL (branch main) into namespace: the
// Applications declared there.
func AppOfAppsYAML(namespace, name, repoURL, path string) string {
	return fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  project: default
  source: {repoURL: %[3]s, path: %[4]s, targetRevision: main}
  destination: {server: https://kubernetes.default.svc, namespace: %[1]s}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
`, namespace, name, repoURL, path)
}

// ChildApplicationYAML is the Git copy of a labelled, automated OCI Application as an app-of-apps
// parent declares it: without spec.source.targetRevision, which Stagecoach writes.
func ChildApplicationYAML(namespace, name, repoURL, stage, target string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: %[2]s, namespace: %[1]s, labels: {stagecoach.dev/stage: %[4]s}}
spec:
  project: default
  source: {repoURL: %[3]q, path: .}
  destination: {server: https://kubernetes.default.svc, namespace: %[5]s}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
`, namespace, name, repoURL, stage, target)
}
