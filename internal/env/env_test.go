package env_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/env"
)

type inner struct {
	URL string `envconfig:"T_URL" default:"nats://127.0.0.1:4222" desc:"servers"`
}

type spec struct {
	inner
	Wait    time.Duration `envconfig:"T_WAIT" default:"1s"`
	On      bool          `envconfig:"T_ON" default:"true"`
	N       int           `envconfig:"T_N" default:"10"`
	Secrets []string      `envconfig:"T_SECRETS"`
	Ignored string
}

func TestLoad(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want spec
		err  string
	}{
		{"defaults", nil, spec{inner: inner{"nats://127.0.0.1:4222"}, Wait: time.Second, On: true, N: 10}, ""},
		{"set", map[string]string{"T_URL": "nats://a:1,nats://b:2", "T_WAIT": "30m", "T_ON": "false", "T_N": "3", "T_SECRETS": "a,b"},
			spec{inner: inner{"nats://a:1,nats://b:2"}, Wait: 30 * time.Minute, On: false, N: 3, Secrets: []string{"a", "b"}}, ""},
		{"bad duration", map[string]string{"T_WAIT": "soon"}, spec{}, "T_WAIT: not a duration like 5s or 30m"},
		{"bad bool", map[string]string{"T_ON": "maybe"}, spec{}, "T_ON: not true or false"},
		{"bad number hides value", map[string]string{"T_N": "s3cret"}, spec{}, "T_N: not an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got spec
			err := env.Load(func(k string) string { return tc.env[k] }, &got)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatal("the error repeats the value")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestVars(t *testing.T) {
	t.Parallel()
	var names []string
	for _, v := range env.Vars(&spec{}) {
		names = append(names, v.Name+"="+v.Default)
	}
	want := "T_URL=nats://127.0.0.1:4222 T_WAIT=1s T_ON=true T_N=10 T_SECRETS="
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("vars %q, want %q", got, want)
	}
}

func TestOneLine(t *testing.T) {
	t.Parallel()
	err := errors.Join(errors.New("NATS_URL: required"), errors.New("SINK_BATCH_SIZE: not an integer"))
	if got, want := env.OneLine(err), "NATS_URL: required; SINK_BATCH_SIZE: not an integer"; got != want {
		t.Errorf("OneLine = %q, want %q", got, want)
	}
}

type checkedConfig struct {
	Port int `envconfig:"PORT" default:"80"`
}

func (c checkedConfig) Validate() error {
	if c.Port <= 0 {
		return errors.Join(errors.New("PORT: must be positive"), errors.New("PORT: see --help"))
	}
	return nil
}

func loadChecked(getenv func(string) string) (checkedConfig, error) {
	var c checkedConfig
	return c, env.Load(getenv, &c)
}

// TestChecked: what cannot be read and what does not validate both come
// back prefixed "config: ", a validation's problems on one line.
func TestChecked(t *testing.T) {
	for _, tc := range []struct{ port, want string }{
		{"8080", ""},
		{"eighty", "config: PORT"},
		{"-1", "config: PORT: must be positive; PORT: see --help"},
	} {
		cfg, err := env.Checked(loadChecked, func(k string) string {
			if k == "PORT" {
				return tc.port
			}
			return ""
		})
		switch {
		case tc.want == "" && (err != nil || cfg.Port != 8080):
			t.Errorf("PORT=%s: %+v, %v", tc.port, cfg, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("PORT=%s: error %v, want prefix %q", tc.port, err, tc.want)
		}
	}
}
