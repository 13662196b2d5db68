// Package schema owns the shape of crawlhouse's ClickHouse archive: the
// versioned migrations of config/migrations rendered for one server or a
// cluster (ON CLUSTER DDL, or node by node where it cannot run), the lock
// that lets one migrator at a time run DDL, the retention TTLs of
// config/retention.sql, and the purge of a takedown (ALTER TABLE ...
// DELETE over every table that holds the content). The sink applies it at
// start-up and `sink migrate`, `sink delete` on demand.
//
// Every migration resumes from any statement it was stopped after, and a
// migrator runs no DDL at all when everything is recorded: see Migrate.
// The connection and the write path are package archive's; this package
// only changes what the tables are.
package schema
