// Package receiver is the receiver binary's HTTP side: the delivery endpoint
// (POST WEBHOOK_PATH) that takes the crawl API's signed webhook deliveries,
// authenticates and validates them, and answers 2xx only once JetStream has
// stored them (and, with the write-ahead log on, once the log has synced
// them), beside the operational endpoints internal/ops serves. The command
// line, configuration loading and start-up are internal/receivercmd's; the
// signature is internal/verify's, what a delivery says internal/events', its
// message form internal/delivery's and its publish internal/stream's.
//
// One concept per file:
//
//   - Server (server.go): New, the routes, and the order of work on one
//     delivery: admission, the body read as it arrives, authentication,
//     validation, publish, answer.
//   - Admission (admission.go) and the byte budget (budget.go): which bodies
//     may be read before their sender is known to hold a secret, and the
//     bound on the body bytes of every delivery in progress; pace.go holds a
//     body to a minimum transfer rate.
//   - Authentication (auth.go, token.go): signatures under one or more
//     secrets, or a shared token for senders that cannot sign.
//   - Publishing: the Publisher interface (server.go), Durable (durable.go)
//     with the write-ahead log, and the tracing decorator (traced.go).
//   - The quarantine (quarantine.go) keeps refused deliveries for a second
//     look, and Redrive (redrive.go) publishes those that now pass.
//   - Refused deliveries are logged at a bounded rate (refusals.go).
//   - Errors (errors.go): the one table that maps each outcome to its status
//     and body; metrics.go counts every outcome.
//   - Configuration (config.go, env.go): Config, Load and Validate.
package receiver
