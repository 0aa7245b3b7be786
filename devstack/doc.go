// Package devstack starts real servers for tests and the local stack:
// FerretDB v1 (embedded, behind a serialising wire-protocol proxy) on a PostgreSQL
// child process, nats-server with JetStream (embedded) and redis-server (child process).
//
// It lives in its own module so that FerretDB and nats-server are linked only
// into tests and the devstack binary, never into production services.
package devstack
