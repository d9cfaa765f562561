package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"
)

var monitoring = filepath.Join("..", "..", "manifests", "monitoring")

// knownSeries are the series names this package serves, with the histograms' _bucket, _sum and
// _count, read from the collectors themselves.
func knownSeries() map[string]bool {
	v := NewVectors()
	known := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	describe := func(c prometheus.Collector, histogram bool) {
		ch := make(chan *prometheus.Desc, 16)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			name := fqName.FindStringSubmatch(d.String())[1]
			known[name] = true
			if histogram {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					known[name+suffix] = true
				}
			}
		}
	}
	for _, c := range v.collectors() {
		_, histogram := c.(*prometheus.HistogramVec)
		describe(c, histogram)
	}
	describe(&StateCollector{}, false)
	return known
}

// queries returns the PromQL of the rules and the dashboard.
func queries(t *testing.T) map[string]string {
	t.Helper()
	g := NewWithT(t)
	out := map[string]string{}
	var rule struct {
		APIVersion string `json:"apiVersion"`
		Kind       string
		Metadata   struct {
			Name, Namespace string
			Labels          map[string]string
		}
		Spec struct {
			Groups []struct {
				Name  string
				Rules []struct {
					Record, Alert, Expr, For string
					Labels, Annotations      map[string]string
				}
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(monitoring, "prometheusrule.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.UnmarshalStrict(data, &rule)).To(Succeed(), "prometheusrule.yaml must be YAML of the shape of a PrometheusRule")
	g.Expect(rule.APIVersion).To(Equal("monitoring.coreos.com/v1"))
	g.Expect(rule.Kind).To(Equal("PrometheusRule"))
	for _, group := range rule.Spec.Groups {
		for _, r := range group.Rules {
			out["rule "+r.Record+r.Alert] = r.Expr
		}
	}
	var dashboard struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	data, err = os.ReadFile(filepath.Join(monitoring, "grafana-dashboard.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(data, &dashboard)).To(Succeed(), "grafana-dashboard.json must be JSON")
	g.Expect(dashboard.Panels).NotTo(BeEmpty())
	for _, p := range dashboard.Panels {
		for i, target := range p.Targets {
			out["panel "+p.Title+" "+string(rune('A'+i))] = target.Expr
		}
	}
	return out
}

func TestMonitoringQueriesUseServedSeries(t *testing.T) {
	known := knownSeries()
	series := regexp.MustCompile(`\bstagecoach_[a-z_]+\b`)
	grouping := regexp.MustCompile(`\bby \(([^)]*)\)`)
	labels := map[string]bool{"le": true}
	for _, l := range withLabels(labelAction, labelResult, labelPhase, labelGate) {
		labels[l] = true
	}
	q := queries(t)
	NewWithT(t).Expect(q).To(HaveKey("rule StagecoachStageStalled"))
	NewWithT(t).Expect(q).To(HaveKey("rule StagecoachCandidateBlocked"))
	NewWithT(t).Expect(q).To(HaveKey("rule StagecoachChangeFailureRateHigh"))
	for name, expr := range q {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(strings.TrimSpace(expr)).NotTo(BeEmpty())
			used := series.FindAllString(expr, -1)
			g.Expect(used).NotTo(BeEmpty(), "the query reads no stagecoach series: %s", expr)
			for _, s := range used {
				g.Expect(known).To(HaveKey(s), "%s is not a series Stagecoach serves", s)
			}
			for _, m := range grouping.FindAllStringSubmatch(expr, -1) {
				for _, l := range strings.Split(m[1], ",") {
					g.Expect(labels).To(HaveKey(strings.TrimSpace(l)), "no series has the label %q", l)
				}
			}
			g.Expect(strings.Count(expr, "(")).To(Equal(strings.Count(expr, ")")), "unbalanced parentheses")
		})
	}
}

// TestMonitoringManifestsFit checks that the ServiceMonitor finds the Service, and the Service
// the controller's pods and metrics port.
func TestMonitoringManifestsFit(t *testing.T) {
	g := NewWithT(t)
	read := func(path string, into any) {
		data, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(yaml.Unmarshal(data, into)).To(Succeed(), path)
	}
	type meta struct {
		Name   string
		Labels map[string]string
	}
	var deployment struct {
		Spec struct {
			Template struct {
				Metadata meta
				Spec     struct {
					Containers []struct {
						Args  []string
						Ports []struct{ Name string }
					}
				}
			}
		}
	}
	var service struct {
		Kind     string
		Metadata meta
		Spec     struct {
			Selector map[string]string
			Ports    []struct{ Name string }
		}
	}
	var monitor struct {
		Kind string
		Spec struct {
			Selector  struct{ MatchLabels map[string]string }
			Endpoints []struct{ Port, Path string }
		}
	}
	var kustomization struct{ Resources []string }
	read(filepath.Join("..", "..", "manifests", "controller", "deployment.yaml"), &deployment)
	read(filepath.Join(monitoring, "service.yaml"), &service)
	read(filepath.Join(monitoring, "servicemonitor.yaml"), &monitor)
	read(filepath.Join(monitoring, "kustomization.yaml"), &kustomization)

	g.Expect(service.Kind).To(Equal("Service"))
	g.Expect(monitor.Kind).To(Equal("ServiceMonitor"))
	for k, v := range service.Spec.Selector {
		g.Expect(deployment.Spec.Template.Metadata.Labels).To(HaveKeyWithValue(k, v), "the Service selects no controller pod")
	}
	for k, v := range monitor.Spec.Selector.MatchLabels {
		g.Expect(service.Metadata.Labels).To(HaveKeyWithValue(k, v), "the ServiceMonitor selects no Service")
	}
	g.Expect(monitor.Spec.Endpoints).To(HaveLen(1))
	g.Expect(monitor.Spec.Endpoints[0].Path).To(Equal("/metrics"))
	g.Expect(service.Spec.Ports).To(ContainElement(HaveField("Name", monitor.Spec.Endpoints[0].Port)))
	g.Expect(deployment.Spec.Template.Spec.Containers[0].Ports).To(ContainElement(HaveField("Name", "metrics")))
	g.Expect(kustomization.Resources).To(ConsistOf("service.yaml", "servicemonitor.yaml", "prometheusrule.yaml"))
}
