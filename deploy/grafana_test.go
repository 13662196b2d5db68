package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"
)

// TestComposeGrafana loads the grafana profile and follows its wiring end to
// end: Prometheus scrapes /metrics of the receiver and the sink on the ports
// they listen on, Grafana's data source is that Prometheus, and the
// dashboard provider reads the mounted directory that holds the chart's
// dashboard. Neither service starts without the profile.
func TestComposeGrafana(t *testing.T) {
	t.Parallel()
	envFile := filepath.Join(root, ".env.example")
	base, err := loadCompose(t, envFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"prometheus", "grafana"} {
		if _, ok := base.DisabledServices[s]; !ok {
			t.Errorf("%s must be in the grafana profile only", s)
		}
	}
	p, err := loadCompose(t, envFile, "grafana")
	if err != nil {
		t.Fatalf("grafana profile does not load: %v", err)
	}
	prom, ok := p.Services["prometheus"]
	if !ok {
		t.Fatal("grafana profile has no prometheus")
	}
	graf, ok := p.Services["grafana"]
	if !ok {
		t.Fatal("grafana profile has no grafana")
	}

	// Prometheus scrapes both binaries where they listen.
	conf := mountOf(t, prom, "bind", "/etc/prometheus/prometheus.yml")
	if !slices.Contains(prom.Command, "--config.file="+conf.Target) {
		t.Errorf("prometheus command %v does not load %s", prom.Command, conf.Target)
	}
	var pc struct {
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			MetricsPath   string `json:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(mustRead(t, conf.Source), &pc); err != nil {
		t.Fatalf("%s: %v", conf.Source, err)
	}
	targets := map[string]string{}
	for _, sc := range pc.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("job %s scrapes %s", sc.JobName, sc.MetricsPath)
		}
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				targets[tg] = sc.JobName
			}
		}
	}
	for service, listen := range map[string]string{"receiver": "RECEIVER_LISTEN", "sink": "SINK_LISTEN"} {
		v := p.Services[service].Environment[listen]
		if v == nil {
			t.Fatalf("%s does not set %s", service, listen)
		}
		target := service + ":" + listenPort(t, *v)
		if job := targets[target]; job != "crawlhouse-"+service {
			t.Errorf("prometheus does not scrape %s as job crawlhouse-%s (targets %v)", target, service, targets)
		}
	}

	// Grafana's data source is that Prometheus.
	prov := mountOf(t, graf, "bind", "/etc/grafana/provisioning")
	var ds struct {
		Datasources []struct {
			Type, URL string
			IsDefault bool `json:"isDefault"`
		}
	}
	if err := yaml.Unmarshal(mustRead(t, filepath.Join(prov.Source, "datasources", "prometheus.yaml")), &ds); err != nil {
		t.Fatal(err)
	}
	promPort := "9090"
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || !ds.Datasources[0].IsDefault ||
		ds.Datasources[0].URL != "http://prometheus:"+promPort {
		t.Errorf("grafana's data source is not the default, http://prometheus:%s: %+v", promPort, ds.Datasources)
	}
	if !slices.ContainsFunc(prom.Ports, func(pc types.ServicePortConfig) bool { return pc.Target == 9090 }) {
		t.Errorf("prometheus does not publish its port %s", promPort)
	}

	// The provider reads the mounted dashboards: the chart's.
	var dp struct {
		Providers []struct {
			Type    string
			Options struct{ Path string }
		}
	}
	if err := yaml.Unmarshal(mustRead(t, filepath.Join(prov.Source, "dashboards", "crawlhouse.yaml")), &dp); err != nil {
		t.Fatal(err)
	}
	if len(dp.Providers) != 1 || dp.Providers[0].Type != "file" {
		t.Fatalf("dashboard providers: %+v", dp.Providers)
	}
	dash := mountOf(t, graf, "bind", dp.Providers[0].Options.Path)
	if want, _ := filepath.Abs(filepath.Dir(dashboardFile)); dash.Source != want {
		t.Errorf("grafana mounts %s as its dashboards, want the chart's %s", dash.Source, want)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []any  `json:"panels"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dash.Source, "crawlhouse.json")), &d); err != nil || d.UID == "" || len(d.Panels) == 0 {
		t.Errorf("the mounted crawlhouse.json is not a dashboard with panels: %v", err)
	}
	if home := graf.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home == nil || !strings.HasPrefix(*home, dash.Target+"/") {
		t.Errorf("grafana's home dashboard %v is not in %s", home, dash.Target)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
