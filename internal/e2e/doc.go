// Package e2e holds the end-to-end tests of the whole pipeline: signed
// deliveries into the real receiver, JetStream embedded in the test process,
// the real sink, and a real ClickHouse: the guarantees README.md promises
// ("What it promises"), checked from the outside.
package e2e
