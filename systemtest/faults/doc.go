// Package faults holds the fault suite of the platform: each test starts the whole
// platform as real processes (stacktest), breaks one real component (Redis, MongoDB,
// NATS, a service process) or runs every service twice behind the gateway, and checks
// what clients see through the gateway and what is left in the stores afterwards.
// The package has no code of its own; everything is in its tests.
package faults
