// Package ops is what every crawlhouse binary (receiver, sink, reader)
// serves to operators and their orchestrators, written once so that all
// three answer alike: /healthz, /readyz (one JSON body, each check's state)
// and /metrics (a Prometheus registry of the binary's own), the JSON writer
// of their answers, and the probe client the container healthcheck runs
// (`receiver probe URL`, `sink probe URL`, `reader probe URL` in a distroless
// container, which has no shell and no curl).
package ops
