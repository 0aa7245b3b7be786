// Package access holds the platform's hostile-access suite: every route of
// openapi.yaml against every kind of credential, every id-bearing parameter pointed at
// another account's or deployment's object, identity headers a client tries to smuggle,
// and a scan of every process's log for the secrets the suite handled. It runs the real
// binaries through stacktest; the package has no code outside its tests.
package access
