package waves

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Argo CD's names for clusters, as its cluster Secrets and Applications spell them.
const (
	// SecretTypeLabel marks Argo CD's Secrets by type; cluster Secrets have the value "cluster".
	SecretTypeLabel   = "argocd.argoproj.io/secret-type"
	SecretTypeCluster = "cluster"
	// InClusterServer and InClusterName are the cluster Argo CD runs in; it needs no Secret.
	inClusterServer = "https://kubernetes.default.svc"
	inClusterName   = "in-cluster"
)

// Cluster is an Argo CD cluster: its name, API server URL and the labels of its Secret.
type Cluster struct {
	Name   string
	Server string
	Labels map[string]string
	// Secret is the name of the cluster Secret; empty for the in-cluster destination without one.
	Secret string
}

// Clusters reads Argo CD cluster Secrets (label argocd.argoproj.io/secret-type: cluster, data
// name and server); other Secrets are skipped. Problems name the Secret and what to fix.
func Clusters(secrets []unstructured.Unstructured) ([]Cluster, []string) {
	var clusters []Cluster
	var problems []string
	for i := range secrets {
		s := &secrets[i]
		if s.GetLabels()[SecretTypeLabel] != SecretTypeCluster {
			continue
		}
		name, errName := secretValue(s, "name")
		server, errServer := secretValue(s, "server")
		if err := firstErr(errName, errServer); err != nil {
			problems = append(problems, fmt.Sprintf("cluster Secret %s/%s: %v; fix its data", s.GetNamespace(), s.GetName(), err))
			continue
		}
		if server == "" {
			problems = append(problems, fmt.Sprintf("cluster Secret %s/%s has no server; add data.server (the cluster's API server URL)", s.GetNamespace(), s.GetName()))
			continue
		}
		clusters = append(clusters, Cluster{Name: name, Server: server, Labels: s.GetLabels(), Secret: s.GetName()})
	}
	// Resolution takes the first match: sorting by Secret name makes a duplicate pick the same
	// Secret every time.
	slices.SortFunc(clusters, func(a, b Cluster) int { return strings.Compare(a.Secret, b.Secret) })
	return clusters, problems
}

// secretValue reads a key of a Secret read through the API (data, base64) or written by hand
// (stringData).
func secretValue(s *unstructured.Unstructured, key string) (string, error) {
	if v, ok, _ := unstructured.NestedString(s.Object, "data", key); ok {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return "", fmt.Errorf("data.%s is not base64: %v", key, err)
		}
		return string(b), nil
	}
	v, _, _ := unstructured.NestedString(s.Object, "stringData", key)
	return v, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// applicationSetGroup is Argo CD's API group, which owns both ApplicationSets and Applications.
const applicationSetGroup = "argoproj.io"

// Owned returns the Applications the ApplicationSet owns: same namespace and an ownerReference
// to it by kind, group and name (and UID when the ApplicationSet has one), in input order.
func Owned(appSet *unstructured.Unstructured, apps []unstructured.Unstructured) []*unstructured.Unstructured {
	var owned []*unstructured.Unstructured
	for i := range apps {
		app := &apps[i]
		if app.GetNamespace() != appSet.GetNamespace() {
			continue
		}
		for _, ref := range app.GetOwnerReferences() {
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			if err != nil || gv.Group != applicationSetGroup || ref.Kind != "ApplicationSet" || ref.Name != appSet.GetName() {
				continue
			}
			// A UID that differs is an ApplicationSet of the same name deleted and made again:
			// its old Applications are not this one's.
			if appSet.GetUID() != "" && ref.UID != appSet.GetUID() {
				continue
			}
			owned = append(owned, app)
			break
		}
	}
	return owned
}

// ResolveTargets turns the ApplicationSet's Applications into targets, each with its
// destination cluster found by spec.destination.server or .name among the cluster Secrets.
// The in-cluster destination counts as a cluster even without a Secret (then without labels).
// Applications whose cluster cannot be found are left out and reported as problems, with the
// Secrets' own problems; phases are left Pending for the caller to set.
func ResolveTargets(appSet *unstructured.Unstructured, apps []unstructured.Unstructured, secrets []unstructured.Unstructured) ([]Target, []string) {
	clusters, problems := Clusters(secrets)
	var targets []Target
	for _, app := range Owned(appSet, apps) {
		c, err := destination(app, clusters)
		if err != nil {
			problems = append(problems, fmt.Sprintf("Application %s/%s: %v", app.GetNamespace(), app.GetName(), err))
			continue
		}
		targets = append(targets, Target{Name: app.GetName(), Cluster: c.Name, Labels: c.Labels, Phase: v1alpha1.PhasePending})
	}
	return targets, problems
}

// destination finds an Application's cluster by server or by name; when both are set they must
// name the same cluster.
func destination(app *unstructured.Unstructured, clusters []Cluster) (Cluster, error) {
	server, _, _ := unstructured.NestedString(app.Object, "spec", "destination", "server")
	name, _, _ := unstructured.NestedString(app.Object, "spec", "destination", "name")
	if server == "" && name == "" {
		return Cluster{}, fmt.Errorf("has no spec.destination.server or .name; set one of them in the ApplicationSet's template")
	}
	var byServer, byName *Cluster
	if server != "" {
		byServer = findCluster(clusters, func(c Cluster) bool { return sameServer(c.Server, server) })
		if byServer == nil && sameServer(server, inClusterServer) {
			byServer = &Cluster{Name: inClusterName, Server: inClusterServer}
		}
		if byServer == nil {
			return Cluster{}, fmt.Errorf("destination server %q matches no Argo CD cluster Secret (label %s: %s); add the cluster to Argo CD or fix the destination", server, SecretTypeLabel, SecretTypeCluster)
		}
	}
	if name != "" {
		byName = findCluster(clusters, func(c Cluster) bool { return c.Name == name })
		if byName == nil && name == inClusterName {
			byName = &Cluster{Name: inClusterName, Server: inClusterServer}
		}
		if byName == nil {
			return Cluster{}, fmt.Errorf("destination name %q matches no Argo CD cluster Secret (label %s: %s); add the cluster to Argo CD or fix the destination", name, SecretTypeLabel, SecretTypeCluster)
		}
	}
	switch {
	case byServer == nil:
		return *byName, nil
	case byName == nil:
		return *byServer, nil
	case byServer.Secret != byName.Secret || !sameServer(byServer.Server, byName.Server):
		return Cluster{}, fmt.Errorf("destination name %q and server %q are different clusters; set only one of them", name, server)
	}
	return *byServer, nil
}

func findCluster(clusters []Cluster, match func(Cluster) bool) *Cluster {
	for i := range clusters {
		if match(clusters[i]) {
			return &clusters[i]
		}
	}
	return nil
}

// sameServer compares API server URLs as Argo CD writes them, with or without a trailing slash.
func sameServer(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}
