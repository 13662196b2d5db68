#!/usr/bin/env bash
# make fuzz: bounded `go test -fuzz` runs of the signature header parser,
# the delivery validation, the HTTP handler and the sink's decoding and row
# mapping of what validation accepts (FUZZTIME each, 20s by default). New failing inputs
# land in the package's testdata/fuzz/ and are replayed by `make test`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
t=${FUZZTIME:-20s}
go test -run '^$' -fuzz '^FuzzParse$' -fuzztime "$t" ./internal/verify
go test -run '^$' -fuzz '^FuzzValidate$' -fuzztime "$t" ./internal/events
# The hand-written validator agrees with encoding/json on what is JSON.
go test -run '^$' -fuzz '^FuzzValidateDifferential$' -fuzztime "$t" ./internal/events
# The sink's decoding (the scanner's spans, the lifted strings) is encoding/json's.
go test -run '^$' -fuzz '^FuzzDecodeAcceptedDifferential$' -fuzztime "$t" ./internal/events
go test -run '^$' -fuzz '^FuzzDocumentDifferential$' -fuzztime "$t" ./internal/events
go test -run '^$' -fuzz '^FuzzHandler$' -fuzztime "$t" ./internal/receivercmd
# Every delivery the receiver accepts, the sink decodes and maps to rows.
go test -run '^$' -fuzz '^FuzzAcceptedIsArchived$' -fuzztime "$t" ./internal/archive
