// Package config holds what an operator configures and what the schema is:
// environment.md (every variable, checked against the configuration structs
// by reference_test.go), the example env files, and the embedded ClickHouse
// migrations.
package config

import "embed"

// Migrations holds the ClickHouse schema migrations, applied in file-name
// order by internal/archive. Each file is a text/template rendered with the
// database and cluster settings (see archive.Render), holding statements
// separated by a semicolon at the end of a line. Every statement must be
// safe to run again (a migration stopped midway is run from its start):
// IF [NOT] EXISTS where ClickHouse has it, and where it has not (EXCHANGE
// TABLES) a "-- if: <query>" line naming the state the statement applies to;
// "-- wait: inserts" lets running INSERTs end first (see archive.Render). A
// released file is never edited: a change to the schema is a new file.
//
//go:embed migrations/*.sql
var Migrations embed.FS
