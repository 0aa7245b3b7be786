// Package platform launches the platform as OS processes, the one way `make run`
// (devstack/cmd/devstack), the system suites (systemtest/stacktest), the gateway in
// front of a service's tests (devstack/gatewaytest) and the bench do it:
//
//   - Build and BinDir build the binaries (once per test process, in one cache dir);
//   - EnsureKeys creates the signing keys and secrets once, in one directory;
//   - Table is the process table (gateway, services, their replicas, the dbt workers),
//     with every process's environment built in one place from the backing servers'
//     URLs and the keys;
//   - Start, Stop, Kill and Restart run one process; WaitReady polls the processes'
//     /readyz on their internal listeners, with a deadline, and reports a failing
//     process's log tail;
//   - StackFile is $DATA_DIR/stack.json, what `make run` writes and tools read.
//
// Functions and plain structs: each caller keeps its own backing servers, ports and
// lifetime.
package platform
