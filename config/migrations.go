// Package config holds what an operator configures and what the schema is:
// environment.md (every variable, checked against the configuration structs
// by reference_test.go), the example env files, and the embedded ClickHouse
// migrations.
package config

import "embed"

// Migrations holds the ClickHouse schema migrations, applied in file-name
// order by internal/archive. Each file is a text/template rendered with the
// database and cluster settings (see schema.Render), holding statements
// separated by a semicolon at the end of a line. Every statement must be
// safe to run again (a migration stopped midway is run from its start):
// IF [NOT] EXISTS where ClickHouse has it, and where it has not (EXCHANGE
// TABLES) a "-- if: <query>" line naming the state the statement applies to;
// "-- wait: inserts" lets running INSERTs end first (see schema.Render).
// Safe to run again means from any point: a sink killed after any statement
// runs the file again from its first one, so a statement that undoes or
// conflicts with a later one (a rename whose old name a later statement
// reuses, an UPDATE naming a column a later statement drops) needs a guard
// ("-- if:") on the state it applies to. archive's
// TestMigrationsResumeAfterEveryStatement checks every file stopped after
// every statement. A released file's schema is never edited: a change to the
// schema is a new file; a guard added to a released file lists the checksum
// it replaces in archive's amended.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Retention holds the statements that set the archive's retention
// (RETENTION_* variables), rendered like a migration with the settings as
// data and applied by the sink whenever they change (schema.ApplyRetention).
// Every statement must be safe to run again from any point, as a
// migration's.
//
//go:embed retention.sql
var Retention string
