package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerStage is one FROM … AS name stage of the Dockerfile, with its
// instructions (continuation lines joined).
type dockerStage struct {
	from  string
	lines []string
}

func readDockerfile(t *testing.T) map[string]*dockerStage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(data), " ")
	from := regexp.MustCompile(`(?i)^FROM\s+(?:--platform=\S+\s+)?(\S+)\s+AS\s+(\S+)$`)
	stages := map[string]*dockerStage{}
	var cur *dockerStage
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if m := from.FindStringSubmatch(line); m != nil {
			cur = &dockerStage{from: m[1]}
			stages[m[2]] = cur
			continue
		}
		if strings.HasPrefix(strings.ToUpper(line), "FROM ") {
			t.Fatalf("Dockerfile: every stage must be named: %q", line)
		}
		if cur != nil {
			cur.lines = append(cur.lines, line)
		}
	}
	return stages
}

// instructions returns a stage's instructions of one kind, following the
// stage's parents inside the Dockerfile (LABEL and USER are inherited).
func (s *dockerStage) instructions(stages map[string]*dockerStage, kind string) []string {
	var out []string
	if parent, ok := stages[s.from]; ok {
		out = parent.instructions(stages, kind)
	}
	for _, l := range s.lines {
		if strings.HasPrefix(strings.ToUpper(l), kind+" ") {
			out = append(out, strings.TrimSpace(l[len(kind):]))
		}
	}
	return out
}

// TestDockerfile checks what an image build would give without a Docker
// engine: a target per binary, static build stamped with version and
// commit, a distroless non-root runtime, OCI labels, and the entrypoint.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	stages := readDockerfile(t)
	build, ok := stages["build"]
	if !ok {
		t.Fatal("Dockerfile has no build stage")
	}
	run := strings.Join(build.instructions(stages, "RUN"), "\n")
	for _, want := range []string{
		"CGO_ENABLED=0",
		"-X github.com/crawlhouse/crawlhouse/internal/version.Version=${VERSION}",
		"-X github.com/crawlhouse/crawlhouse/internal/version.Commit=${COMMIT}",
		"./cmd/receiver", "./cmd/sink", "./cmd/reader", "./cmd/crawlsim",
	} {
		if !strings.Contains(run, want) {
			t.Errorf("build stage does not run %q", want)
		}
	}
	for _, binary := range []string{"receiver", "sink", "reader", "crawlsim"} {
		t.Run(binary, func(t *testing.T) {
			s, ok := stages[binary]
			if !ok {
				t.Fatalf("no %q target", binary)
			}
			base := s
			for {
				p, ok := stages[base.from]
				if !ok {
					break
				}
				base = p
			}
			if !strings.HasPrefix(base.from, "gcr.io/distroless/static") {
				t.Errorf("runtime base %s: want distroless/static (no shell, static binaries)", base.from)
			}
			users := s.instructions(stages, "USER")
			if len(users) == 0 || strings.HasPrefix(users[len(users)-1], "0") || strings.HasPrefix(users[len(users)-1], "root") {
				t.Errorf("%s runs as %v: want a non-root user", binary, users)
			}
			labels := strings.Join(s.instructions(stages, "LABEL"), " ")
			for _, l := range []string{"org.opencontainers.image.version=\"${VERSION}\"", "org.opencontainers.image.revision=\"${COMMIT}\"", "org.opencontainers.image.title=", "org.opencontainers.image.source="} {
				if !strings.Contains(labels, l) {
					t.Errorf("%s lacks label %s", binary, l)
				}
			}
			want := `["/usr/local/bin/` + binary + `"]`
			if ep := s.instructions(stages, "ENTRYPOINT"); !slices.Contains(ep, want) {
				t.Errorf("%s ENTRYPOINT %v, want %s", binary, ep, want)
			}
			if cp := strings.Join(s.instructions(stages, "COPY"), "\n"); !strings.Contains(cp, "--from=build /out/"+binary+" /usr/local/bin/"+binary) {
				t.Errorf("%s does not copy its binary from the build stage", binary)
			}
		})
	}
}

// TestDockerignore keeps secrets and bulk out of the build context.
func TestDockerignore(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for _, want := range []string{".git", ".env", "bin", "var", "deploy"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore lacks %q", want)
		}
	}
	for _, needed := range []string{"go.mod", "go.sum", "cmd", "internal", "config"} {
		if slices.Contains(lines, needed) {
			t.Errorf(".dockerignore excludes %q, which the build needs", needed)
		}
	}
}
