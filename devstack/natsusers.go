package devstack

import (
	"slices"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/analyticsco/platform/libs/audit/publish"
	"github.com/analyticsco/platform/libs/identity/lookup"
)

// NATSUser is one platform process's NATS user and the subjects it may use: what it
// publishes (JetStream API calls included: they are publishes to $JS.API.*), what it
// subscribes to, and whether it answers requests (publishing only to the reply subject
// of a request it received, once, within a minute).
type NATSUser struct {
	Name      string // the process: compose service, Kubernetes Deployment
	Publish   []string
	Subscribe []string
	Responds  bool
}

// The platform's JetStream resources and request subjects a permission names. The
// audit and identity subjects come from libs; dbtsync-svc owns the others (its
// client.ResolveSubject and queue/jetstream constants), which devstack cannot import:
// the stack tests (every sync, mint and audit read of the e2e suite) fail if they drift.
const (
	natsInbox          = "_INBOX.>" // replies to this connection's requests and JetStream deliveries
	auditStream        = publish.StreamName
	jobsStream         = "DBTSYNC_JOBS"
	jobsSubjects       = "dbtsync.jobs.>"
	jobsKV             = "dbtsync_jobs"
	ledgersKV          = "dbtsync_ledgers"
	manifestStore      = "dbtsync_manifests"
	branchResolve      = "dbtsync.branches.resolve"
	identityLookupsAll = "identity.lookup.*"
)

// streamAPI is the JetStream API of one stream and its consumers: create, update, info,
// purge and delete it, read its messages, create, read from and acknowledge its
// consumers.
func streamAPI(stream string) []string {
	return []string{
		"$JS.API.STREAM.*." + stream,
		"$JS.API.STREAM.MSG.*." + stream,
		"$JS.API.DIRECT.GET." + stream,
		"$JS.API.DIRECT.GET." + stream + ".>",
		"$JS.API.CONSUMER.*." + stream,
		"$JS.API.CONSUMER.*." + stream + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".>",
		"$JS.ACK." + stream + ".>",
		"$JS.FC." + stream + ".>",
	}
}

// auditPublisher is what a process recording audit events needs: its own subject of the
// AUDIT stream, and creating the stream when it is missing (publish.Publisher), nothing of
// another service's subject and no consumer of the stream.
func auditPublisher(service string) []string {
	return []string{publish.Subject(service), "$JS.API.STREAM.INFO." + auditStream, "$JS.API.STREAM.CREATE." + auditStream}
}

// dbtsyncPipeline is the sync pipeline both dbtsync processes open: the jobs stream (its
// consumers, one per deployment, included), the job-state and storage-ledger buckets and
// the manifest object store, and publishing jobs. Creating a bucket reads the account's
// JetStream limits ($JS.API.INFO).
func dbtsyncPipeline() []string {
	out := []string{jobsSubjects, "$KV." + jobsKV + ".>", "$KV." + ledgersKV + ".>", "$O." + manifestStore + ".>", "$JS.API.INFO"}
	for _, s := range []string{jobsStream, "KV_" + jobsKV, "KV_" + ledgersKV, "OBJ_" + manifestStore} {
		out = append(out, streamAPI(s)...)
	}
	return out
}

// NATSUsers are the platform's NATS users, one per process, and what each may do:
//   - only the gateway answers identity lookups (and publishes nothing else);
//   - each service publishes only its own audit subject, and only embed-svc, the trail's
//     owner, reads the AUDIT stream;
//   - the dbt worker, which runs untrusted repositories, gets its jobs (and hears them
//     published, to wake up), the job-state and ledger buckets, the manifest store and its
//     own audit subject: it answers no request and sends none;
//   - platformctl records the API keys it creates and revokes.
//
// The local stack (StartNATS) and the stack tests run with exactly these users;
// deploy/nats/platform-users.conf holds them for compose and Kubernetes, and a deploytest
// test checks the file against this table.
func NATSUsers() []NATSUser {
	return []NATSUser{
		{Name: "gateway", Subscribe: []string{identityLookupsAll}, Responds: true},
		{Name: "workspace-svc", Publish: auditPublisher("workspace-svc"), Subscribe: []string{natsInbox}},
		{Name: "embed-svc",
			Publish: slices.Concat([]string{publish.Subject("embed-svc"), lookup.DeploymentSubject, lookup.UserSubject, branchResolve},
				streamAPI(auditStream)),
			Subscribe: []string{natsInbox}},
		{Name: "dbtsync-svc", Publish: slices.Concat(auditPublisher("dbtsync-svc"), dbtsyncPipeline()),
			Subscribe: []string{natsInbox, branchResolve}, Responds: true},
		{Name: "dbtsync-worker", Publish: slices.Concat(auditPublisher("dbtsync-worker"), dbtsyncPipeline()),
			Subscribe: []string{natsInbox, jobsSubjects}},
		{Name: "platformctl", Publish: auditPublisher("platformctl"), Subscribe: []string{natsInbox}},
	}
}

// Permissions are u's permissions as nats-server holds them: a user that publishes
// nothing but answers requests has an empty allow list (responses only), as the server
// makes of a configuration file's allow_responses.
func (u NATSUser) Permissions() *server.Permissions {
	p := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: slices.Clone(u.Publish)},
		Subscribe: &server.SubjectPermission{Allow: slices.Clone(u.Subscribe)},
	}
	if p.Publish.Allow == nil {
		p.Publish.Allow = []string{}
	}
	if u.Responds {
		p.Response = &server.ResponsePermission{MaxMsgs: server.DEFAULT_ALLOW_RESPONSE_MAX_MSGS, Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION}
	}
	return p
}
