package devstack

import (
	"slices"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/analyticsco/platform/libs/audit/publish"
	"github.com/analyticsco/platform/libs/identity/lookup"
	"github.com/analyticsco/platform/libs/natsx"
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
// audit and identity subjects come from libs; dbtsync-svc owns the pipeline's and the
// branch resolver (its client.ResolveSubject and queue/jetstream constants), embed-svc's
// client the viewer lookup (ViewerSubject) and the dashboard reach (ReachSubject), which
// devstack cannot import: the stack tests (every sync, mint, embed read and audit read
// of the e2e suite) fail if they drift.
const (
	auditStream = publish.StreamName
	// storedStream is embed-svc's stream of the events the trail stored, which its
	// webhook dispatcher reads (limits retention; only embed-svc publishes or reads it).
	storedStream       = "AUDIT_STORED"
	storedSubjects     = "audit.stored.>"
	jobsStream         = "DBTSYNC_JOBS"
	jobsSubjects       = "dbtsync.jobs.>"
	jobsKV             = "dbtsync_jobs"
	ledgersKV          = "dbtsync_ledgers"
	manifestStore      = "dbtsync_manifests"
	branchResolve      = "dbtsync.branches.resolve"
	objectRemove       = "dbtsync.objects.remove"
	identityLookupsAll = "identity.lookup.*"
	viewerGroups       = "embed.viewer.groups"
	dashboardReach     = "workspace.embed.reach"
)

// inbox is what user subscribes to for the replies to its requests, JetStream's answers
// and pull deliveries included: its own inbox prefix (natsx.InboxPrefix, which
// server.ConnectNATS gives its connection), never another user's nor all of _INBOX.
func inbox(user string) string { return natsx.InboxPrefix(user) + ".>" }

// streamAPI is the JetStream API of one stream and its consumers for the stream's owner:
// create, update, info, purge and delete it, read and delete its messages, and
// streamConsumers.
func streamAPI(stream string) []string {
	return append([]string{"$JS.API.STREAM.*." + stream, "$JS.API.STREAM.MSG.*." + stream}, streamConsumers(stream)...)
}

// streamUse is the JetStream API of one stream for a process that uses it but does not
// manage it: the stream's info, reading its messages, and streamConsumers. It cannot
// create, update, purge or delete the stream, nor delete its messages.
func streamUse(stream string) []string {
	return append([]string{"$JS.API.STREAM.INFO." + stream, "$JS.API.STREAM.MSG.GET." + stream}, streamConsumers(stream)...)
}

// streamConsumers is reading one stream's messages directly and creating, reading from
// and acknowledging its consumers.
func streamConsumers(stream string) []string {
	return []string{
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

// pipelineStreams are the streams of the sync pipeline: the jobs stream, the job-state
// and storage-ledger buckets' and the manifest object store's.
var pipelineStreams = []string{jobsStream, "KV_" + jobsKV, "KV_" + ledgersKV, "OBJ_" + manifestStore}

// pipelineData is the sync pipeline's messages: publishing jobs, and the buckets' and the
// object store's entries.
var pipelineData = []string{jobsSubjects, "$KV." + jobsKV + ".>", "$KV." + ledgersKV + ".>", "$O." + manifestStore + ".>"}

// dbtsyncPipeline is the sync pipeline as dbtsync-svc, its owner, opens it: it creates the
// jobs stream, the job-state and storage-ledger buckets and the manifest object store,
// or updates their configuration, and uses them. Creating a bucket reads the account's
// JetStream limits ($JS.API.INFO).
func dbtsyncPipeline() []string {
	out := append(slices.Clone(pipelineData), "$JS.API.INFO")
	for _, s := range pipelineStreams {
		out = append(out, streamAPI(s)...)
	}
	return out
}

// workerPipeline is the sync pipeline as the dbt worker uses it: it binds to the streams
// dbtsync-svc made and takes its jobs (the consumers, one per deployment), reads and
// writes job state, ledgers and objects, but cannot create, update, delete or purge a
// stream. Not even the object store's: removing an object purges its chunks with a
// purge filtered to them, which NATS authorizes by the stream's subject alone, so the
// right to remove one object would be the right to purge them all. The worker asks
// dbtsync-svc to remove an object instead (objectRemove), and writes a result only to a
// name no object holds (a put over an existing one purges it).
func workerPipeline() []string {
	out := slices.Clone(pipelineData)
	for _, s := range pipelineStreams {
		out = append(out, streamUse(s)...)
	}
	return append(out, objectRemove)
}

// NATSUsers are the platform's NATS users, one per process, and what each may do:
//   - only the gateway answers identity lookups; it publishes only its own audit subject
//     (the API keys it manages);
//   - each service publishes only its own audit subject, and only embed-svc, the trail's
//     owner, reads the AUDIT stream and publishes and reads the stream of stored events
//     (AUDIT_STORED, its webhook dispatcher's input);
//   - embed-svc answers workspace-svc's embed viewer lookups (a viewer's current groups),
//     and workspace-svc answers embed-svc's dashboard reach (the dry-run mint's
//     dashboards): each asks only the other, and nobody else may ask either;
//   - embed-svc asks both identity lookups; workspace-svc asks only whose a deployment is
//     (a promotion's target), never for a user;
//   - the dbt worker, which runs untrusted repositories, gets its jobs (and hears them
//     published, to wake up), the job-state and ledger buckets, the manifest store and its
//     own audit subject: it answers no request and sends only dbtsync-svc's object
//     removals, and it uses the pipeline's streams without managing them (only
//     dbtsync-svc creates, updates, purges or deletes them, and removes objects);
//   - platformctl records the API keys it creates and revokes;
//   - each user subscribes to its own inbox only (inbox), so no process receives another's
//     replies or JetStream deliveries.
//
// The local stack (StartNATS) and the stack tests run with exactly these users;
// deploy/nats/platform-users.conf holds them for compose and Kubernetes, and a deploytest
// test checks the file against this table.
func NATSUsers() []NATSUser {
	return []NATSUser{
		{Name: "gateway", Publish: auditPublisher("gateway"), Subscribe: []string{inbox("gateway"), identityLookupsAll}, Responds: true},
		{Name: "workspace-svc", Publish: append(auditPublisher("workspace-svc"), viewerGroups, lookup.DeploymentSubject),
			Subscribe: []string{inbox("workspace-svc"), dashboardReach}, Responds: true},
		{Name: "embed-svc",
			Publish: slices.Concat([]string{publish.Subject("embed-svc"), lookup.DeploymentSubject, lookup.UserSubject, branchResolve, dashboardReach},
				streamAPI(auditStream), []string{storedSubjects}, streamAPI(storedStream)),
			Subscribe: []string{inbox("embed-svc"), viewerGroups}, Responds: true},
		{Name: "dbtsync-svc", Publish: slices.Concat(auditPublisher("dbtsync-svc"), dbtsyncPipeline()),
			Subscribe: []string{inbox("dbtsync-svc"), branchResolve, objectRemove}, Responds: true},
		{Name: "dbtsync-worker", Publish: slices.Concat(auditPublisher("dbtsync-worker"), workerPipeline()),
			Subscribe: []string{inbox("dbtsync-worker"), jobsSubjects}},
		{Name: "platformctl", Publish: auditPublisher("platformctl"), Subscribe: []string{inbox("platformctl")}},
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
