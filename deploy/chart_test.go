package deploy_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	yamlv3 "gopkg.in/yaml.v3"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

var (
	chartDir         = filepath.Join(root, "charts", "crawlhouse")
	productionValues = filepath.Join(chartDir, "ci", "production-values.yaml")
	dashboardFile    = filepath.Join(chartDir, "dashboards", "crawlhouse.json")
	kubeVersion      = &chartutil.KubeVersion{Version: "v1.31.0", Major: "1", Minor: "31"}
)

const (
	releaseName = "crawlhouse"
	namespace   = "crawl"
)

// rendered is a chart rendered as `helm install --dry-run` would, each
// manifest decoded strictly into its Kubernetes type.
type rendered struct {
	notes       string
	deployments map[string]*appsv1.Deployment
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
	services    map[string]*corev1.Service
	ingresses   []*networkingv1.Ingress
	hpas        []*autoscalingv2.HorizontalPodAutoscaler
	pdbs        []*policyv1.PodDisruptionBudget
	netpols     []*networkingv1.NetworkPolicy
	monitors    []*monitoringv1.ServiceMonitor
	rules       []*monitoringv1.PrometheusRule
}

// kinds maps each apiVersion and kind the chart renders to its Go type.
// Manifests are decoded strictly: an unknown or misplaced field (a typo, a
// wrong indentation) fails the test instead of being dropped silently by
// the API server.
var kinds = map[string]any{
	"apps/v1 Deployment":                      &appsv1.Deployment{},
	"v1 ConfigMap":                            &corev1.ConfigMap{},
	"v1 Secret":                               &corev1.Secret{},
	"v1 Service":                              &corev1.Service{},
	"v1 ServiceAccount":                       &corev1.ServiceAccount{},
	"networking.k8s.io/v1 Ingress":            &networkingv1.Ingress{},
	"networking.k8s.io/v1 NetworkPolicy":      &networkingv1.NetworkPolicy{},
	"autoscaling/v2 HorizontalPodAutoscaler":  &autoscalingv2.HorizontalPodAutoscaler{},
	"policy/v1 PodDisruptionBudget":           &policyv1.PodDisruptionBudget{},
	"monitoring.coreos.com/v1 ServiceMonitor": &monitoringv1.ServiceMonitor{},
	"monitoring.coreos.com/v1 PrometheusRule": &monitoringv1.PrometheusRule{},
}

func readValues(t *testing.T, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	vals, err := chartutil.ReadValuesFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func renderChart(t *testing.T, vals map[string]any) *rendered {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun = true
	install.ClientOnly = true
	install.ReleaseName = releaseName
	install.Namespace = namespace
	install.KubeVersion = kubeVersion
	rel, err := install.Run(chrt, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	r := &rendered{
		notes:       rel.Info.Notes,
		deployments: map[string]*appsv1.Deployment{},
		configMaps:  map[string]*corev1.ConfigMap{},
		secrets:     map[string]*corev1.Secret{},
		services:    map[string]*corev1.Service{},
	}
	for name, doc := range releaseutil.SplitManifests(rel.Manifest) {
		var meta struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		obj, ok := kinds[meta.APIVersion+" "+meta.Kind]
		if !ok {
			t.Fatalf("%s: %s %s has no Go type in this test: add one", name, meta.APIVersion, meta.Kind)
		}
		obj = reflect.New(reflect.TypeOf(obj).Elem()).Interface()
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s (%s) does not decode strictly: %v\n%s", name, meta.Kind, err, doc)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			r.deployments[o.Name] = o
		case *corev1.ConfigMap:
			r.configMaps[o.Name] = o
		case *corev1.Secret:
			r.secrets[o.Name] = o
		case *corev1.Service:
			r.services[o.Name] = o
		case *networkingv1.Ingress:
			r.ingresses = append(r.ingresses, o)
		case *networkingv1.NetworkPolicy:
			r.netpols = append(r.netpols, o)
		case *autoscalingv2.HorizontalPodAutoscaler:
			r.hpas = append(r.hpas, o)
		case *policyv1.PodDisruptionBudget:
			r.pdbs = append(r.pdbs, o)
		case *monitoringv1.ServiceMonitor:
			r.monitors = append(r.monitors, o)
		case *monitoringv1.PrometheusRule:
			r.rules = append(r.rules, o)
		}
	}
	return r
}

// TestChartLint runs `helm lint` (the SDK's linter) with the default and
// the production values; warnings fail as errors do.
func TestChartLint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, values string }{{"default", ""}, {"production", productionValues}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := lint.AllWithKubeVersion(chartDir, readValues(t, tc.values), namespace, kubeVersion)
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %s", m)
				}
			}
		})
	}
}

// TestChartDefault renders the default values: a working install against
// in-cluster NATS and ClickHouse, with a generated webhook secret.
func TestChartDefault(t *testing.T) {
	t.Parallel()
	r := renderChart(t, readValues(t, ""))
	checkWorkloads(t, r)
	if got := len(r.ingresses) + len(r.hpas) + len(r.monitors) + len(r.rules) + len(r.netpols); got != 0 {
		t.Errorf("default values create %d optional resources (ingress, HPA, monitoring, policies)", got)
	}
	if _, ok := r.configMaps[releaseName+"-dashboard"]; ok {
		t.Errorf("default values create the Grafana dashboard ConfigMap")
	}
	sec := r.secrets[releaseName+"-secrets"]
	if sec == nil || sec.StringData["WEBHOOK_SECRETS"] == "" {
		t.Errorf("default install should generate WEBHOOK_SECRETS in %s-secrets", releaseName)
	}
	for _, want := range []string{
		"http://" + releaseName + "-receiver." + namespace + ".svc:80/webhooks/crawl",
		"sync_interval: always",
		"get secret " + releaseName + "-secrets",
	} {
		if !strings.Contains(r.notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, r.notes)
		}
	}
}

// TestChartProduction renders the production-like values: 3 receivers
// behind an HTTPS Ingress, 2 sinks, an external NATS cluster and ClickHouse
// cluster, an existing Secret, monitoring and network policies.
func TestChartProduction(t *testing.T) {
	t.Parallel()
	r := renderChart(t, readValues(t, productionValues))
	checkWorkloads(t, r)

	recv, sink := r.deployments[releaseName+"-receiver"], r.deployments[releaseName+"-sink"]
	if recv.Spec.Replicas == nil || *recv.Spec.Replicas != 3 {
		t.Errorf("receiver replicas %v, want 3", recv.Spec.Replicas)
	}
	if sink.Spec.Replicas == nil || *sink.Spec.Replicas != 2 {
		t.Errorf("sink replicas %v, want 2", sink.Spec.Replicas)
	}
	if len(r.secrets) != 0 {
		t.Errorf("with secrets.existingSecret the chart must not create a Secret")
	}
	recvEnv := containerEnv(t, r, recv)
	sinkEnv := containerEnv(t, r, sink)
	for _, env := range []map[string]corev1.EnvVar{recvEnv, sinkEnv} {
		if n := len(strings.Split(env["NATS_URL"].Value, ",")); n != 3 {
			t.Errorf("NATS_URL lists %d servers, want the 3 of the cluster", n)
		}
		if env["NATS_REPLICAS"].Value != "3" {
			t.Errorf("NATS_REPLICAS=%q, want 3", env["NATS_REPLICAS"].Value)
		}
		if ca := env["NATS_TLS_CA"].Value; ca != "/etc/crawlhouse/nats-ca/ca.crt" {
			t.Errorf("NATS_TLS_CA=%q", ca)
		}
		for _, k := range []string{"NATS_USER", "NATS_PASSWORD"} {
			if ref := env[k].ValueFrom; ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "crawlhouse-prod" {
				t.Errorf("%s should come from the existing Secret crawlhouse-prod", k)
			}
		}
	}
	for _, d := range []*appsv1.Deployment{recv, sink} {
		if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
			return v.Secret != nil && v.Secret.SecretName == "nats-ca"
		}) {
			t.Errorf("%s does not mount the NATS CA Secret", d.Name)
		}
	}
	if sinkEnv["CLICKHOUSE_CLUSTER"].Value != "crawlhouse" || sinkEnv["CLICKHOUSE_TLS"].Value != "true" {
		t.Errorf("sink should use the TLS ClickHouse cluster: %v %v", sinkEnv["CLICKHOUSE_CLUSTER"], sinkEnv["CLICKHOUSE_TLS"])
	}
	if recvEnv["WEBHOOK_SIGNATURE_HEADER"].Value != "X-Firecrawl-Signature" {
		t.Errorf("WEBHOOK_SIGNATURE_HEADER=%q", recvEnv["WEBHOOK_SIGNATURE_HEADER"].Value)
	}

	if len(r.ingresses) != 1 {
		t.Fatalf("%d Ingresses, want 1", len(r.ingresses))
	}
	ing := r.ingresses[0]
	if len(ing.Spec.TLS) == 0 || !slices.Contains(ing.Spec.TLS[0].Hosts, "hooks.crawlhouse.example.com") {
		t.Errorf("Ingress has no TLS for its host")
	}
	for _, rule := range ing.Spec.Rules {
		for _, p := range rule.HTTP.Paths {
			if p.Path != recvEnv["WEBHOOK_PATH"].Value {
				t.Errorf("Ingress exposes %s; only WEBHOOK_PATH %s should be public", p.Path, recvEnv["WEBHOOK_PATH"].Value)
			}
			svc := r.services[p.Backend.Service.Name]
			if svc == nil || !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == p.Backend.Service.Port.Name }) {
				t.Errorf("Ingress backend %s:%s does not exist", p.Backend.Service.Name, p.Backend.Service.Port.Name)
			}
		}
	}
	if want := "https://hooks.crawlhouse.example.com/webhooks/crawl"; !strings.Contains(r.notes, want) {
		t.Errorf("NOTES.txt should give the webhook URL %s:\n%s", want, r.notes)
	}
	if len(r.pdbs) != 2 {
		t.Errorf("%d PodDisruptionBudgets, want receiver and sink", len(r.pdbs))
	}
	if len(r.netpols) != 2 {
		t.Errorf("%d NetworkPolicies, want receiver and sink", len(r.netpols))
	}
	for _, np := range r.netpols {
		d := r.deployments[np.Name]
		if d == nil || !maps.Equal(np.Spec.PodSelector.MatchLabels, d.Spec.Selector.MatchLabels) {
			t.Errorf("NetworkPolicy %s does not select its Deployment's pods", np.Name)
			continue
		}
		port := d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort
		if len(np.Spec.Ingress) == 0 || np.Spec.Ingress[0].Ports[0].Port.IntVal != port {
			t.Errorf("NetworkPolicy %s does not open the container port %d", np.Name, port)
		}
	}
	checkMonitoring(t, r)
	checkDashboard(t, r, "monitoring")
}

// checkDashboard: the dashboard ConfigMap carries the label the Grafana
// sidecar watches and holds the repository's dashboard, byte for byte (the
// file the compose file provisions too).
func checkDashboard(t *testing.T, r *rendered, ns string) {
	t.Helper()
	cm := r.configMaps[releaseName+"-dashboard"]
	if cm == nil {
		t.Fatalf("no ConfigMap %s-dashboard", releaseName)
	}
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v lack grafana_dashboard: \"1\"", cm.Labels)
	}
	if cm.Namespace != ns {
		t.Errorf("dashboard ConfigMap in namespace %q, want %q", cm.Namespace, ns)
	}
	want, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	got := cm.Data["crawlhouse.json"]
	if strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
		t.Errorf("the ConfigMap's crawlhouse.json (%d bytes) is not %s (%d bytes)", len(got), dashboardFile, len(want))
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []any  `json:"panels"`
	}
	if err := json.Unmarshal([]byte(got), &dash); err != nil || dash.UID == "" || len(dash.Panels) == 0 {
		t.Errorf("the ConfigMap's dashboard does not decode to a dashboard with panels: %v", err)
	}
}

// TestChartAutoscaling: with the HPA on, the Deployment leaves replicas to it.
func TestChartAutoscaling(t *testing.T) {
	t.Parallel()
	vals := readValues(t, productionValues)
	vals["receiver"].(map[string]any)["autoscaling"] = map[string]any{"enabled": true, "minReplicas": 3, "maxReplicas": 12}
	r := renderChart(t, vals)
	if len(r.hpas) != 1 {
		t.Fatalf("%d HPAs, want 1", len(r.hpas))
	}
	hpa := r.hpas[0]
	if hpa.Spec.ScaleTargetRef.Name != releaseName+"-receiver" || *hpa.Spec.MinReplicas != 3 || hpa.Spec.MaxReplicas != 12 {
		t.Errorf("HPA %+v", hpa.Spec)
	}
	if r.deployments[releaseName+"-receiver"].Spec.Replicas != nil {
		t.Errorf("receiver Deployment sets replicas while the HPA owns them")
	}
}

// checkWorkloads checks what must hold for any values: each Deployment runs
// its binary with only variables it reads, probes on /healthz and /readyz
// at the port the binary listens on, and a locked-down security context.
func checkWorkloads(t *testing.T, r *rendered) {
	t.Helper()
	ref := envReference(t)
	for _, binary := range binaries {
		name := releaseName + "-" + binary
		d := r.deployments[name]
		if d == nil {
			t.Errorf("no Deployment %s", name)
			continue
		}
		t.Run(binary, func(t *testing.T) {
			pod := d.Spec.Template.Spec
			if !maps.Equal(d.Spec.Selector.MatchLabels, filterKeys(d.Spec.Template.Labels, d.Spec.Selector.MatchLabels)) {
				t.Errorf("selector %v does not match the pod labels %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
			}
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(pod.Containers))
			}
			c := pod.Containers[0]
			if !regexp.MustCompile(`/` + binary + `:[\w.-]+$`).MatchString(c.Image) {
				t.Errorf("image %s is not the %s image", c.Image, binary)
			}
			env := containerEnv(t, r, d)
			checkVars(t, ref, binary, "Deployment "+name, slices.Collect(maps.Keys(env)))

			listenVar := map[string]string{"receiver": "RECEIVER_LISTEN", "sink": "SINK_LISTEN", "reader": "READER_LISTEN"}[binary]
			port := listenPort(t, env[listenVar].Value)
			if len(c.Ports) != 1 || c.Ports[0].Name != "http" || fmt.Sprint(c.Ports[0].ContainerPort) != port {
				t.Errorf("container ports %v, want http on %s=%s", c.Ports, listenVar, env[listenVar].Value)
			}
			for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
				if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "http" {
					t.Errorf("want an HTTP probe on %s at port http, got %+v", path, probe)
				}
			}
			if c.StartupProbe != nil && (c.StartupProbe.HTTPGet == nil || c.StartupProbe.HTTPGet.Path != "/healthz") {
				t.Errorf("startup probe should ask /healthz")
			}

			sc, psc := c.SecurityContext, pod.SecurityContext
			if sc == nil || psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
				t.Errorf("pod must run as a non-root user: %+v", psc)
			}
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				t.Errorf("container security context %+v: want read-only root, no escalation, capabilities dropped", sc)
			}
			if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
				t.Errorf("resources %+v: want CPU and memory requests and a memory limit", c.Resources)
			}
			for _, m := range c.VolumeMounts {
				if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name }) {
					t.Errorf("volume mount %s has no volume", m.Name)
				}
			}
			for _, k := range []string{"NATS_CREDS", "NATS_TLS_CA"} {
				if v, ok := env[k]; ok && !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
					return strings.HasPrefix(v.Value, m.MountPath+"/")
				}) {
					t.Errorf("%s=%s is not on a mounted volume", k, v.Value)
				}
			}

			svc := r.services[name]
			if svc == nil {
				t.Fatalf("no Service %s", name)
			}
			if !maps.Equal(svc.Spec.Selector, d.Spec.Selector.MatchLabels) {
				t.Errorf("Service selector %v, Deployment selector %v", svc.Spec.Selector, d.Spec.Selector.MatchLabels)
			}
			for _, sp := range svc.Spec.Ports {
				if sp.TargetPort.String() != "http" {
					t.Errorf("Service port %s targets %s, want the container port http", sp.Name, sp.TargetPort.String())
				}
			}
		})
	}
	recvEnv := containerEnv(t, r, r.deployments[releaseName+"-receiver"])
	for _, k := range []string{"CLICKHOUSE_PASSWORD", "CRAWL_API_KEY", "ALERT_WEBHOOK_URL"} {
		if _, ok := recvEnv[k]; ok {
			t.Errorf("the receiver gets %s, which only the sink needs", k)
		}
	}
	if ws := recvEnv["WEBHOOK_SECRETS"].ValueFrom; ws == nil || ws.SecretKeyRef == nil || (ws.SecretKeyRef.Optional != nil && *ws.SecretKeyRef.Optional) {
		t.Errorf("WEBHOOK_SECRETS must come from a Secret, not optional: %+v", ws)
	}
	all := map[string]bool{}
	for _, b := range binaries {
		for k := range ref[b] {
			all[k] = true
		}
	}
	for _, s := range r.secrets {
		for k := range s.StringData {
			if !all[k] {
				t.Errorf("Secret %s holds %s, which no binary reads", s.Name, k)
			}
		}
	}
}

// containerEnv is the container's environment as the binary sees it:
// ConfigMaps from envFrom, then env (which wins). Secret references are
// kept as references.
func containerEnv(t *testing.T, r *rendered, d *appsv1.Deployment) map[string]corev1.EnvVar {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil || from.Prefix != "" {
			t.Errorf("%s: envFrom %+v: only ConfigMaps without prefix are expected", d.Name, from)
			continue
		}
		cm := r.configMaps[from.ConfigMapRef.Name]
		if cm == nil {
			t.Fatalf("%s: ConfigMap %s is not rendered", d.Name, from.ConfigMapRef.Name)
		}
		for k, v := range cm.Data {
			env[k] = corev1.EnvVar{Name: k, Value: v}
		}
	}
	for _, e := range c.Env {
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil && ref.SecretKeyRef.Key != e.Name {
			t.Errorf("%s: %s reads Secret key %s; keys are named as the variables", d.Name, e.Name, ref.SecretKeyRef.Key)
		}
		env[e.Name] = e
	}
	return env
}

// knownMetrics are the series the alerts may use: the crawlhouse_ names the
// binaries' source writes (so an alert cannot watch a metric that does not
// exist), the NATS exporter's consumer pending count and Prometheus's up.
func knownMetrics(t *testing.T) []string {
	t.Helper()
	known := []string{"up", "jetstream_consumer_num_pending"}
	name := regexp.MustCompile(`crawlhouse_[a-z_]+[a-z]`)
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range name.FindAllString(string(data), -1) {
			// A histogram's series: its name with _bucket, _sum, _count.
			known = append(known, n, n+"_bucket", n+"_sum", n+"_count")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return known
}

// checkMonitoring checks the ServiceMonitor targets both Services and that
// the alerts on-call needs exist and use known metrics.
func checkMonitoring(t *testing.T, r *rendered) {
	t.Helper()
	if len(r.monitors) != 1 || len(r.rules) != 1 {
		t.Fatalf("%d ServiceMonitors and %d PrometheusRules, want 1 each", len(r.monitors), len(r.rules))
	}
	sm := r.monitors[0]
	for _, name := range []string{releaseName + "-receiver", releaseName + "-sink"} {
		svc := r.services[name]
		if !maps.Equal(sm.Spec.Selector.MatchLabels, filterKeys(svc.Labels, sm.Spec.Selector.MatchLabels)) {
			t.Errorf("ServiceMonitor does not select Service %s", name)
		}
		if len(sm.Spec.Endpoints) == 0 || !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == sm.Spec.Endpoints[0].Port }) {
			t.Errorf("ServiceMonitor port is not a port of %s", name)
		}
	}
	if ep := sm.Spec.Endpoints[0]; ep.Path != "/metrics" {
		t.Errorf("ServiceMonitor path %s", ep.Path)
	}

	alerts := map[string]string{}
	for _, g := range r.rules[0].Spec.Groups {
		for _, rule := range g.Rules {
			alerts[rule.Alert] = rule.Expr.String()
			if rule.Labels["severity"] == "" || rule.Annotations["summary"] == "" {
				t.Errorf("alert %s needs a severity and a summary", rule.Alert)
			}
		}
	}
	for _, want := range []string{
		"CrawlhousePageFailures", "CrawlhouseDeadLettersGrowing", "CrawlhouseConsumerLag",
		"CrawlhouseReceiverErrors", "CrawlhouseReceiverUnavailable", "CrawlhouseBackfillErrors",
		"CrawlhouseReceiverDown", "CrawlhouseSinkDown", "CrawlhouseSinkStalled", "CrawlhouseLagGrowing",
		"CrawlhouseDeadLettersWaiting", "CrawlhouseDeliveriesQuarantined",
		"CrawlhouseReaderDown", "CrawlhouseReaderErrors", "CrawlhouseReaderSlow", "CrawlhouseReaderQueriesLimited",
	} {
		if _, ok := alerts[want]; !ok {
			t.Errorf("PrometheusRule lacks %s", want)
		}
	}
	// Every alert links its runbook: a section of docs/operations.md whose
	// heading is the alert's name (GitHub's anchor: the name in lower case).
	ops, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range r.rules[0].Spec.Groups {
		for _, rule := range g.Rules {
			url := rule.Annotations["runbook_url"]
			if want := "/docs/operations.md#" + strings.ToLower(rule.Alert); !strings.HasSuffix(url, want) {
				t.Errorf("alert %s: runbook_url %q, want one ending in %s", rule.Alert, url, want)
			}
			if !regexp.MustCompile(`(?m)^###? ` + rule.Alert + `\s*$`).Match(ops) {
				t.Errorf("docs/operations.md has no section headed %s (the alert's runbook)", rule.Alert)
			}
		}
	}
	known := knownMetrics(t)
	metric := regexp.MustCompile(`\b(crawlhouse_[a-z_]+|jetstream_[a-z_]+|up)\s*\{`)
	for name, expr := range alerts {
		found := metric.FindAllStringSubmatch(expr, -1)
		if len(found) == 0 {
			t.Errorf("%s: no metric found in %q", name, expr)
		}
		for _, m := range found {
			if !slices.Contains(known, m[1]) {
				t.Errorf("%s uses %s, which nothing exports", name, m[1])
			}
		}
		if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") {
			t.Errorf("%s: unbalanced expression %q", name, expr)
		}
		if strings.Contains(expr, "crawlhouse_") && !strings.Contains(expr, `namespace="`+namespace+`"`) {
			t.Errorf("%s does not select this release's namespace: %q", name, expr)
		}
	}
}

func filterKeys(m, keys map[string]string) map[string]string {
	out := map[string]string{}
	for k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// TestValuesDocumented: every value in values.yaml has a comment, on
// itself or on the block it belongs to.
func TestValuesDocumented(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(n *yamlv3.Node, path string, documented bool)
	walk = func(n *yamlv3.Node, path string, documented bool) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := strings.TrimPrefix(path+"."+k.Value, ".")
			d := documented || strings.TrimSpace(k.HeadComment) != ""
			if v.Kind == yamlv3.MappingNode && len(v.Content) > 0 && v.Style&yamlv3.FlowStyle == 0 {
				walk(v, p, d)
			} else if !d {
				t.Errorf("values.yaml: %s has no comment", p)
			}
		}
	}
	walk(doc.Content[0], "", false)
}

// TestChartAllowUnsigned: for development the receiver may take unsigned
// deliveries; no secret is generated and the pod starts without one.
func TestChartAllowUnsigned(t *testing.T) {
	t.Parallel()
	r := renderChart(t, map[string]any{"webhook": map[string]any{"allowUnsigned": true}})
	if s := r.secrets[releaseName+"-secrets"]; s == nil || s.StringData["WEBHOOK_SECRETS"] != "" {
		t.Errorf("allowUnsigned should not generate WEBHOOK_SECRETS")
	}
	env := containerEnv(t, r, r.deployments[releaseName+"-receiver"])
	if env["WEBHOOK_ALLOW_UNSIGNED"].Value != "true" {
		t.Errorf("WEBHOOK_ALLOW_UNSIGNED=%q", env["WEBHOOK_ALLOW_UNSIGNED"].Value)
	}
	if ref := env["WEBHOOK_SECRETS"].ValueFrom; ref == nil || ref.SecretKeyRef.Optional == nil || !*ref.SecretKeyRef.Optional {
		t.Errorf("WEBHOOK_SECRETS must be optional when unsigned deliveries are allowed")
	}
	if !strings.Contains(r.notes, "Development only") {
		t.Errorf("NOTES.txt should warn about unsigned deliveries")
	}
}

// TestChartRejects: values that cannot work fail at render time with a
// message naming the value.
func TestChartRejects(t *testing.T) {
	t.Parallel()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun, install.ClientOnly = true, true
	install.ReleaseName, install.Namespace, install.KubeVersion = releaseName, namespace, kubeVersion
	_, err = install.Run(chrt, map[string]any{"receiver": map[string]any{"ingress": map[string]any{"enabled": true}}})
	if err == nil || !strings.Contains(err.Error(), "receiver.ingress.hosts") {
		t.Errorf("an Ingress without hosts rendered (err %v)", err)
	}
	_, err = install.Run(chrt, map[string]any{"reader": map[string]any{"ingress": map[string]any{"enabled": true}}})
	if err == nil || !strings.Contains(err.Error(), "reader.ingress.hosts") {
		t.Errorf("a reader Ingress without hosts rendered (err %v)", err)
	}
}

// TestChartTracing: tracing is off by default (no OTEL_* variable at all,
// so the binaries start no exporter); otel.endpoint turns it on for the
// receiver and the sink alike, with the sampler values.
func TestChartTracing(t *testing.T) {
	t.Parallel()
	off := renderChart(t, readValues(t, ""))
	for _, d := range []string{releaseName + "-receiver", releaseName + "-sink"} {
		for k := range containerEnv(t, off, off.deployments[d]) {
			if strings.HasPrefix(k, "OTEL_") {
				t.Errorf("%s: default values set %s; tracing must stay off", d, k)
			}
		}
	}
	const endpoint = "http://otel-collector.observability:4318"
	on := renderChart(t, map[string]any{"otel": map[string]any{"endpoint": endpoint, "sampler": "parentbased_traceidratio", "samplerArg": "0.1"}})
	checkWorkloads(t, on)
	for _, d := range []string{releaseName + "-receiver", releaseName + "-sink"} {
		env := containerEnv(t, on, on.deployments[d])
		for k, want := range map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
			"OTEL_TRACES_SAMPLER_ARG":     "0.1",
		} {
			if got := env[k].Value; got != want {
				t.Errorf("%s: %s=%q, want %q", d, k, got, want)
			}
		}
	}
}

// TestReaderIngress: reader.ingress exposes the API, its description and the
// pages on each host, with its TLS, to the reader Service's port, and
// nothing else (not /metrics nor the probes). TestChartRejects has it
// without a host.
func TestReaderIngress(t *testing.T) {
	r := renderChart(t, map[string]any{"reader": map[string]any{"ingress": map[string]any{
		"enabled": true, "hosts": []any{"archive.example.com"},
		"tls": []any{map[string]any{"secretName": "archive-tls", "hosts": []any{"archive.example.com"}}},
	}}})
	if len(r.ingresses) != 1 {
		t.Fatalf("%d Ingresses, want the reader's", len(r.ingresses))
	}
	ing := r.ingresses[0]
	if len(ing.Spec.TLS) == 0 || ing.Spec.TLS[0].SecretName != "archive-tls" {
		t.Errorf("reader Ingress TLS %+v", ing.Spec.TLS)
	}
	got := map[string]string{}
	for _, rule := range ing.Spec.Rules {
		if rule.Host != "archive.example.com" {
			t.Errorf("host %q", rule.Host)
		}
		for _, p := range rule.HTTP.Paths {
			got[p.Path] = string(*p.PathType)
			svc := r.services[p.Backend.Service.Name]
			if svc == nil || !strings.HasSuffix(svc.Name, "-reader") || !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == p.Backend.Service.Port.Name }) {
				t.Errorf("path %s: backend %s:%s is not the reader Service's port", p.Path, p.Backend.Service.Name, p.Backend.Service.Port.Name)
			}
		}
	}
	want := map[string]string{"/v1/": "Prefix", "/ui/": "Prefix", "/openapi.json": "Exact"}
	if !maps.Equal(got, want) {
		t.Errorf("reader Ingress paths %v, want %v", got, want)
	}
	if !strings.Contains(r.notes, "https://archive.example.com/ui/") {
		t.Errorf("NOTES.txt should give the pages' URL:\n%s", r.notes)
	}

}
