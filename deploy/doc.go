// Package deploy holds the tests of crawlhouse's deployment files: the
// Dockerfile, docker-compose.yml (loaded with the Compose specification's own
// Go loader) and the Helm chart charts/crawlhouse (rendered and linted with
// Helm's Go SDK, every manifest decoded strictly into its Kubernetes type).
//
// It is a module of its own so that Helm, Kubernetes and Compose stay out of
// the service's go.mod. There is no Docker engine or cluster in CI: these
// tests check what can be checked without one, and the source of truth for
// "what the binaries read" is config/environment.md, which
// config/reference_test.go keeps equal to the binaries' config structs.
package deploy
