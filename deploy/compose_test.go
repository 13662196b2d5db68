package deploy_test

import (
	"context"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	yamlv3 "gopkg.in/yaml.v3"
)

// loadCompose loads docker-compose.yml as `docker compose` would, with the
// variables of envFile (the .env) and the given profiles.
func loadCompose(t *testing.T, envFile string, profiles ...string) (*types.Project, error) {
	t.Helper()
	opts := []cli.ProjectOptionsFn{
		cli.WithWorkingDirectory(root),
		cli.WithName("crawlhouse"),
		cli.WithProfiles(profiles),
		cli.WithResolvedPaths(true),
	}
	if envFile != "" {
		opts = append(opts, cli.WithEnvFiles(envFile), cli.WithDotEnv)
	}
	o, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return o.LoadProject(context.Background())
}

// TestCompose loads docker-compose.yml with .env.example and checks the
// stack's shape: the four services and the demo, their health checks on
// /readyz, persistent volumes, NATS's sync_interval, and that the
// crawlhouse services set only variables their binary reads.
func TestCompose(t *testing.T) {
	t.Parallel()
	ref := envReference(t)
	envFile := filepath.Join(root, ".env.example")

	p, err := loadCompose(t, envFile)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	if got, want := slices.Sorted(maps.Keys(p.Services)), []string{"clickhouse", "nats", "reader", "receiver", "sink"}; !slices.Equal(got, want) {
		t.Errorf("services without a profile: %v, want %v", got, want)
	}
	if _, ok := p.DisabledServices["crawlsim"]; !ok {
		t.Errorf("crawlsim must be in the demo profile only")
	}
	for _, v := range []string{"nats-data", "clickhouse-data"} {
		if _, ok := p.Volumes[v]; !ok {
			t.Errorf("no named volume %s", v)
		}
	}

	t.Run("nats", func(t *testing.T) {
		s := p.Services["nats"]
		if !strings.HasPrefix(s.Image, "nats:") {
			t.Errorf("nats image %q: want the official image", s.Image)
		}
		conf := mountOf(t, s, "bind", "/etc/nats/crawlhouse.conf")
		if !slices.Contains(s.Command, conf.Target) {
			t.Errorf("nats command %v does not load %s", s.Command, conf.Target)
		}
		data, err := os.ReadFile(conf.Source)
		if err != nil {
			t.Fatal(err)
		}
		js := regexp.MustCompile(`(?s)jetstream\s*\{(.*?)\}`).FindStringSubmatch(string(data))
		if js == nil {
			t.Fatalf("%s has no jetstream block", conf.Source)
		}
		if !regexp.MustCompile(`(?m)^\s*sync_interval:\s*always\s*$`).MatchString(js[1]) {
			t.Errorf("%s: jetstream block lacks `sync_interval: always`", conf.Source)
		}
		store := regexp.MustCompile(`store_dir:\s*(\S+)`).FindStringSubmatch(js[1])
		data_ := mountOf(t, s, "volume", "/data")
		if store == nil || !strings.HasPrefix(store[1], data_.Target) {
			t.Errorf("JetStream store_dir %v is not on the nats-data volume (%s)", store, data_.Target)
		}
		if s.HealthCheck == nil || !strings.Contains(strings.Join(s.HealthCheck.Test, " "), "/healthz?js-enabled-only=true") {
			t.Errorf("nats health check should ask /healthz?js-enabled-only=true")
		}
	})

	t.Run("clickhouse", func(t *testing.T) {
		s := p.Services["clickhouse"]
		if !strings.HasPrefix(s.Image, "clickhouse/clickhouse-server:") {
			t.Errorf("clickhouse image %q: want the official server image", s.Image)
		}
		checkClickHouseTag(t, strings.TrimPrefix(s.Image, "clickhouse/clickhouse-server:"))
		mountOf(t, s, "volume", "/var/lib/clickhouse")
		if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 {
			t.Errorf("clickhouse has no health check")
		}
		if pw := s.Environment["CLICKHOUSE_PASSWORD"]; pw == nil || *pw == "" {
			t.Errorf("clickhouse has no password from .env")
		}
	})

	for _, binary := range binaries {
		t.Run(binary, func(t *testing.T) {
			s := p.Services[binary]
			checkVars(t, ref, binary, "compose service "+binary, slices.Collect(maps.Keys(s.Environment)))
			if s.Build == nil || s.Build.Target != binary {
				t.Errorf("%s is not built from the Dockerfile's %s target", binary, binary)
			} else if _, ok := readDockerfile(t)[s.Build.Target]; !ok {
				t.Errorf("Dockerfile has no target %q", s.Build.Target)
			}
			listenVar := map[string]string{"receiver": "RECEIVER_LISTEN", "sink": "SINK_LISTEN", "reader": "READER_LISTEN"}[binary]
			listen := ref[binary][listenVar]
			if v := s.Environment[listenVar]; v != nil {
				listen = *v
			}
			port := listenPort(t, listen)
			// The image has no shell or curl: the binary probes itself.
			want := []string{"CMD", "/usr/local/bin/" + binary, "probe", "http://127.0.0.1:" + port + "/readyz"}
			if s.HealthCheck == nil || !slices.Equal(s.HealthCheck.Test, want) {
				t.Errorf("%s health check %v, want %v", binary, s.HealthCheck, want)
			}
			if !slices.ContainsFunc(s.Ports, func(pc types.ServicePortConfig) bool { return pc.Target == uint32(mustAtoi(t, port)) }) {
				t.Errorf("%s publishes %v, not its listen port %s", binary, s.Ports, port)
			}
			if !s.ReadOnly || !slices.Contains(s.CapDrop, "ALL") {
				t.Errorf("%s should run with a read-only root filesystem and no capabilities", binary)
			}
			if binary == "reader" {
				// The read API speaks only to ClickHouse.
				return
			}
			checkServiceURL(t, p, s, "NATS_URL", "nats", "4222")
			if dep, ok := s.DependsOn["nats"]; !ok || dep.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s must wait for a healthy nats", binary)
			}
			if tok := s.Environment["NATS_TOKEN"]; tok == nil || *tok == "" {
				t.Errorf("%s has no NATS_TOKEN from .env", binary)
			}
		})
	}
	t.Run("receiver secrets", func(t *testing.T) {
		s := p.Services["receiver"]
		if v := s.Environment["WEBHOOK_SECRETS"]; v == nil || *v == "" {
			t.Errorf("receiver has no WEBHOOK_SECRETS from .env")
		}
		for _, k := range []string{"CLICKHOUSE_PASSWORD", "CRAWL_API_KEY"} {
			if _, ok := s.Environment[k]; ok {
				t.Errorf("receiver gets %s, which only the sink needs", k)
			}
		}
	})
	t.Run("reader", func(t *testing.T) {
		s := p.Services["reader"]
		checkServiceURL(t, p, s, "CLICKHOUSE_ADDR", "clickhouse", "9000")
		for _, k := range []string{"READER_TOKENS", "READER_CURSOR_KEY"} {
			if v := s.Environment[k]; v == nil || *v == "" {
				t.Errorf("reader has no %s from .env", k)
			}
		}
		for _, k := range []string{"NATS_URL", "NATS_TOKEN", "CRAWL_API_KEY", "WEBHOOK_SECRETS"} {
			if _, ok := s.Environment[k]; ok {
				t.Errorf("reader gets %s, which it does not need", k)
			}
		}
		// It reads the tables the sink's migrations create.
		if dep, ok := s.DependsOn["sink"]; !ok || dep.Condition != types.ServiceConditionHealthy {
			t.Errorf("reader must wait for a healthy sink (the migrations)")
		}
	})
	t.Run("sink clickhouse", func(t *testing.T) {
		s := p.Services["sink"]
		checkServiceURL(t, p, s, "CLICKHOUSE_ADDR", "clickhouse", "9000")
		if dep, ok := s.DependsOn["clickhouse"]; !ok || dep.Condition != types.ServiceConditionHealthy {
			t.Errorf("sink must wait for a healthy clickhouse")
		}
		ch := p.Services["clickhouse"]
		for _, k := range []string{"CLICKHOUSE_USER", "CLICKHOUSE_PASSWORD"} {
			if a, b := s.Environment[k], ch.Environment[k]; a == nil || b == nil || *a != *b {
				t.Errorf("sink and clickhouse disagree on %s", k)
			}
		}
	})

	t.Run("demo", func(t *testing.T) {
		d, err := loadCompose(t, envFile, "demo")
		if err != nil {
			t.Fatalf("demo profile does not load: %v", err)
		}
		s, ok := d.Services["crawlsim"]
		if !ok {
			t.Fatal("demo profile has no crawlsim")
		}
		if s.Build == nil || s.Build.Target != "crawlsim" {
			t.Errorf("crawlsim is not built from the crawlsim target")
		}
		checkCrawlsim(t, d, s)
	})
}

// TestComposeSecretsRequired: without a .env the stack refuses to start
// rather than run with empty secrets.
func TestComposeSecretsRequired(t *testing.T) {
	t.Parallel()
	_, err := loadCompose(t, "")
	if err == nil {
		t.Fatal("docker-compose.yml loads without .env: secrets must be required (${VAR:?…})")
	}
	if !strings.Contains(err.Error(), "in .env") {
		t.Errorf("error %q should say to set the variable in .env", err)
	}
}

// TestEnvExample keeps .env.example and the compose file's variables equal:
// each variable the compose file interpolates is shown in .env.example, and
// .env.example holds nothing the compose file ignores.
func TestEnvExample(t *testing.T) {
	t.Parallel()
	compose, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)`).FindAllStringSubmatch(string(compose), -1) {
		used[m[1]] = true
	}
	example := readEnvFile(t, filepath.Join(root, ".env.example"))
	for v := range used {
		if _, ok := example[v]; !ok {
			t.Errorf("docker-compose.yml uses ${%s}, which .env.example does not show", v)
		}
	}
	for v := range example {
		if !used[v] {
			t.Errorf(".env.example sets %s, which docker-compose.yml does not use", v)
		}
	}
}

// TestExampleEnvFiles: the example env files set only variables that some
// binary reads, and production.env configures the durable production shape.
func TestExampleEnvFiles(t *testing.T) {
	t.Parallel()
	ref := envReference(t)
	all := map[string]string{}
	for _, b := range binaries {
		maps.Copy(all, ref[b])
	}
	for _, f := range []string{"local.env", "production.env"} {
		vars := readEnvFile(t, filepath.Join(root, "config", f))
		for v := range vars {
			if _, ok := all[v]; !ok {
				t.Errorf("config/%s sets %s, which no binary reads", f, v)
			}
		}
	}
	prod := readEnvFile(t, filepath.Join(root, "config", "production.env"))
	for k, want := range map[string]string{"NATS_REPLICAS": "3", "NATS_EMBEDDED": "false", "CLICKHOUSE_TLS": "true"} {
		if prod[k] != want {
			t.Errorf("production.env: %s=%q, want %q", k, prod[k], want)
		}
	}
	if prod["CLICKHOUSE_CLUSTER"] == "" || len(strings.Split(prod["NATS_URL"], ",")) < 3 {
		t.Errorf("production.env should use a NATS cluster and a ClickHouse cluster")
	}
}

func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("%s:%d: not NAME=value", path, n+1)
			continue
		}
		if _, dup := vars[k]; dup {
			t.Errorf("%s:%d: %s set twice", path, n+1, k)
		}
		vars[k] = v
	}
	return vars
}

func mountOf(t *testing.T, s types.ServiceConfig, typ, target string) types.ServiceVolumeConfig {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Type == typ && v.Target == target {
			return v
		}
	}
	t.Fatalf("%s has no %s mount at %s", s.Name, typ, target)
	return types.ServiceVolumeConfig{}
}

// checkServiceURL checks that an address variable points at a compose
// service and port.
func checkServiceURL(t *testing.T, p *types.Project, s types.ServiceConfig, name, service, port string) {
	t.Helper()
	v := s.Environment[name]
	if v == nil {
		t.Errorf("%s does not set %s", s.Name, name)
		return
	}
	host := *v
	if u, err := url.Parse(*v); err == nil && u.Host != "" {
		host = u.Host
	}
	if host != service+":"+port {
		t.Errorf("%s: %s=%s, want %s:%s", s.Name, name, *v, service, port)
	}
	if _, ok := p.Services[service]; !ok {
		t.Errorf("%s: %s names service %s, which does not exist", s.Name, name, service)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("%q is not a port", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// checkCrawlsim checks that the demo's simulator sends to the receiver with
// the receiver's secret and header, and serves the status API where the
// sink's backfill looks for it, using flags the simulator has.
func checkCrawlsim(t *testing.T, p *types.Project, s types.ServiceConfig) {
	t.Helper()
	ref := envReference(t)
	checkVars(t, ref, "crawlsim", "compose service crawlsim", slices.Collect(maps.Keys(s.Environment)))

	known := crawlsimFlags(t)
	flags := map[string]string{}
	for _, arg := range s.Command {
		name, value, ok := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if !strings.HasPrefix(arg, "-") || !ok {
			t.Errorf("crawlsim argument %q: want -name=value", arg)
			continue
		}
		if !known[name] {
			t.Errorf("crawlsim has no flag -%s (internal/testkit/crawlsim/run.go)", name)
		}
		flags[name] = value
	}
	env := func(svc, name string) string {
		if v := p.Services[svc].Environment[name]; v != nil {
			return *v
		}
		return ref[svc][name]
	}
	target, err := url.Parse(flags["target"])
	if err != nil {
		t.Fatalf("-target: %v", err)
	}
	if want := "receiver:" + listenPort(t, env("receiver", "RECEIVER_LISTEN")); target.Host != want || target.Path != env("receiver", "WEBHOOK_PATH") {
		t.Errorf("-target=%s, want http://%s%s", target, want, env("receiver", "WEBHOOK_PATH"))
	}
	if flags["signature-header"] != env("receiver", "WEBHOOK_SIGNATURE_HEADER") {
		t.Errorf("-signature-header=%s, receiver expects %s", flags["signature-header"], env("receiver", "WEBHOOK_SIGNATURE_HEADER"))
	}
	secret := s.Environment["WEBHOOK_SECRET"]
	if secret == nil || !slices.Contains(strings.Split(env("receiver", "WEBHOOK_SECRETS"), ","), *secret) {
		t.Errorf("crawlsim's WEBHOOK_SECRET is not one of the receiver's WEBHOOK_SECRETS")
	}
	if key := s.Environment["CRAWL_API_KEY"]; key == nil || *key != env("sink", "CRAWL_API_KEY") {
		t.Errorf("crawlsim and sink disagree on CRAWL_API_KEY")
	}
	api, err := url.Parse(env("sink", "CRAWL_API_URL"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "crawlsim:" + listenPort(t, flags["listen"]); api.Host != want {
		t.Errorf("sink's CRAWL_API_URL=%s, but crawlsim serves on %s", api, want)
	}
	if dep, ok := s.DependsOn["receiver"]; !ok || dep.Condition != types.ServiceConditionHealthy {
		t.Errorf("crawlsim must wait for a healthy receiver")
	}
}

// crawlsimFlags reads the simulator's flag names from its source, so the
// demo cannot use a flag that does not exist.
func crawlsimFlags(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "internal", "testkit", "crawlsim", "run.go"))
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	re := regexp.MustCompile(`fs\.[A-Z]\w*\((?:&[\w.]+,\s*)?"([a-z0-9-]+)"`)
	for _, m := range re.FindAllStringSubmatch(string(data), -1) {
		flags[m[1]] = true
	}
	if len(flags) == 0 {
		t.Fatal("found no flags in internal/testkit/crawlsim/run.go")
	}
	return flags
}

// TestComposeTracing: tracing is off unless .env names an endpoint; the
// tracing profile adds a collector whose config takes OTLP on 4317 and
// 4318 into a traces pipeline, and an endpoint pointing at it reaches it.
func TestComposeTracing(t *testing.T) {
	t.Parallel()
	envFile := filepath.Join(root, ".env.example")
	p, err := loadCompose(t, envFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.DisabledServices["otel-collector"]; !ok {
		t.Errorf("otel-collector must be in the tracing profile only")
	}
	for _, name := range []string{"receiver", "sink"} {
		v := p.Services[name].Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]
		if v == nil || *v != "" {
			t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT=%v with .env.example, want it empty (tracing off)", name, v)
		}
	}

	dir := t.TempDir()
	example, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	on := filepath.Join(dir, ".env")
	if err := os.WriteFile(on, append(example, "\nOTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector:4318\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	tp, err := loadCompose(t, on, "tracing")
	if err != nil {
		t.Fatalf("tracing profile does not load: %v", err)
	}
	col, ok := tp.Services["otel-collector"]
	if !ok {
		t.Fatal("tracing profile has no otel-collector")
	}
	for _, name := range []string{"receiver", "sink"} {
		checkServiceURL(t, tp, tp.Services[name], "OTEL_EXPORTER_OTLP_ENDPOINT", "otel-collector", "4318")
	}
	var config string
	for _, v := range col.Volumes {
		if v.Type == types.VolumeTypeBind && slices.Contains(col.Command, "--config="+v.Target) {
			config = v.Source
		}
	}
	if config == "" {
		t.Fatalf("otel-collector's --config is not a bind-mounted file: %v %v", col.Command, col.Volumes)
	}
	data, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Receivers struct {
			OTLP struct {
				Protocols struct {
					GRPC struct{ Endpoint string } `yaml:"grpc"`
					HTTP struct{ Endpoint string } `yaml:"http"`
				} `yaml:"protocols"`
			} `yaml:"otlp"`
		} `yaml:"receivers"`
		Exporters map[string]any `yaml:"exporters"`
		Service   struct {
			Pipelines map[string]struct {
				Receivers []string `yaml:"receivers"`
				Exporters []string `yaml:"exporters"`
			} `yaml:"pipelines"`
		} `yaml:"service"`
	}
	if err := yamlv3.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("%s: %v", config, err)
	}
	if !strings.HasSuffix(cfg.Receivers.OTLP.Protocols.HTTP.Endpoint, ":4318") || !strings.HasSuffix(cfg.Receivers.OTLP.Protocols.GRPC.Endpoint, ":4317") {
		t.Errorf("collector OTLP receivers %+v, want HTTP on 4318 and gRPC on 4317", cfg.Receivers.OTLP.Protocols)
	}
	traces, ok := cfg.Service.Pipelines["traces"]
	if !ok || !slices.Contains(traces.Receivers, "otlp") || len(traces.Exporters) == 0 {
		t.Errorf("collector has no traces pipeline from otlp: %+v", cfg.Service.Pipelines)
	}
	for _, e := range traces.Exporters {
		if _, ok := cfg.Exporters[e]; !ok {
			t.Errorf("traces pipeline exports to %s, which is not configured", e)
		}
	}
}

// checkClickHouseTag: the compose file pins an LTS release (x.3 or x.8)
// inside the supported range that the chart's values name ("ClickHouse
// 26.2 to 26.7"; internal/archive checks the binaries say the same).
func checkClickHouseTag(t *testing.T, tag string) {
	t.Helper()
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`ClickHouse (\d+)\.(\d+) to (\d+)\.(\d+)`).FindStringSubmatch(strings.ReplaceAll(string(values), "\n# ", " "))
	if m == nil {
		t.Fatal("values.yaml names no supported range \"ClickHouse x.y to x.y\"")
	}
	release := func(major, minor string) int {
		a, _ := strconv.Atoi(major)
		b, _ := strconv.Atoi(minor)
		return a*100 + b
	}
	parts := regexp.MustCompile(`^(\d+)\.(\d+)(\.[\d.]+)?$`).FindStringSubmatch(tag)
	if parts == nil {
		t.Fatalf("clickhouse image tag %q: want a pinned release (year.month[.patch]), not a moving tag", tag)
	}
	got := release(parts[1], parts[2])
	if got < release(m[1], m[2]) || got > release(m[3], m[4]) {
		t.Errorf("clickhouse image tag %q is outside the supported range %s.%s to %s.%s", tag, m[1], m[2], m[3], m[4])
	}
	if minor := parts[2]; minor != "3" && minor != "8" {
		t.Errorf("clickhouse image tag %q: want an LTS release (x.3 or x.8)", tag)
	}
}
