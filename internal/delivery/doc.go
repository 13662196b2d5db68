// Package delivery owns a crawl delivery as a JetStream message: the
// headers that describe it, how its body is carried (as received,
// compressed with zstd, or stored aside in an object store when it is too
// large for one message), how a message is read back into an Envelope and
// its body, and the dead letter: how a delivery the sink could not archive
// is written into the dead-letter stream, and the redrive that moves it
// back.
//
// It is the one place that knows the message form. The receiver's
// publisher (internal/stream) writes with Encode; the sink reads with
// Decode and Bodies.Open and dead-letters with DeadLetters. The domain
// (what a delivery says) is internal/events; the connection, and each
// stream and body store with its configuration (the events stream's and
// the dead-letter stream's), are internal/stream.
package delivery
