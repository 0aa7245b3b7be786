// Package redisha is the Redis high-availability suite (`make test-redis-ha`): the
// platform (two gateways, two replicas of every service) on a Sentinel group and on a
// Redis Cluster, a primary killed under steady mints, exchanges, revocations and
// embed-token requests, and then the rules that must have held throughout: no revoked
// token accepted by any gateway at any moment, every unrevoked session served, every
// session id exchanged at most once, and every error a 503 with Retry-After. It prints
// each failover's downtime and the 503s clients saw. The package has no code of its own;
// everything is in its tests.
package redisha
