// Package config is workspace-svc's configuration, read from the environment.
package config

import (
	"time"

	"github.com/analyticsco/platform/libs/audit/publish"
	"github.com/analyticsco/platform/libs/config"
	"github.com/analyticsco/platform/libs/idempotency"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// Config is everything workspace-svc reads from its environment.
type Config struct {
	config.Common
	HTTPAddr                 string        `env:"HTTP_ADDR" default:"127.0.0.1:8081" help:"public listen address: the API and /healthz"`
	InternalAddr             string        `env:"INTERNAL_ADDR" default:"127.0.0.1:9081" help:"internal listen address: /healthz, /readyz and /metrics for probes and Prometheus"`
	MongoURI                 string        `env:"MONGODB_URI" default:"mongodb://127.0.0.1:27018/" secret:"true" help:"MongoDB connection string (may hold a password)"`
	MongoDatabase            string        `env:"MONGODB_DATABASE" default:"workspace" help:"database owned by workspace-svc"`
	IdentitySigningKey       string        `env:"IDENTITY_SIGNING_KEY" required:"true" secret:"true" help:"this service's own forwarded-identity key (platformctl identity-key --service workspace-svc: svc:workspace-svc:...), or the gateway's key; verifies the identity the gateway forwards"`
	MaxItemsPerDeployment    int64         `env:"WORKSPACE_MAX_ITEMS_PER_DEPLOYMENT" default:"100000" help:"folders, workbooks and reports one deployment may hold; a create past it is 400"`
	MaxMetaBytes             int           `env:"WORKSPACE_MAX_META_BYTES" default:"262144" help:"largest meta JSON of a workbook or report; larger is 413"`
	MaxCalculatedFieldsBytes int           `env:"WORKSPACE_MAX_CALCULATED_FIELDS_BYTES" default:"262144" help:"largest calculatedFields JSON of a workbook or report; larger is 413"`
	MaxDraftBytes            int           `env:"WORKSPACE_MAX_DRAFT_BYTES" default:"524288" help:"largest dashboard draft of a workbook; larger is 413"`
	MaxPublishedBytes        int           `env:"WORKSPACE_MAX_PUBLISHED_BYTES" default:"4194304" help:"largest published dashboard of a workbook, as stored (its config and a snapshot of every report it names); a publish past it is 413"`
	MaxFolderGrants          int           `env:"WORKSPACE_MAX_FOLDER_GRANTS" default:"1000" help:"most grants one folder holds; setting more is 400"`
	MaxEmbedAccessEntries    int           `env:"WORKSPACE_MAX_EMBED_ACCESS_ENTRIES" default:"200" help:"most embed access entries (allEmbedUsers, tenants and groups together) one workbook, folder or the root holds; setting more is 400 embed_access_limit"`
	MaxFavorites             int           `env:"WORKSPACE_MAX_FAVORITES" default:"1000" help:"favorites one user may keep in one deployment; one more is 400"`
	MaxSearchScan            int           `env:"WORKSPACE_MAX_SEARCH_SCAN" default:"1000" help:"items a search or filtered listing examines per page before it answers the page so far (hasNextPage true, a cursor to go on)"`
	MaxListScan              int           `env:"WORKSPACE_MAX_LIST_SCAN" default:"1000" help:"children a folder listing examines per page before it answers the page so far (hasNextPage true, a cursor to go on): the bound when the caller can view few of many"`
	MaxDashboardReports      int           `env:"WORKSPACE_MAX_DASHBOARD_REPORTS" default:"200" help:"distinct reports (widgets' config.reportId) one dashboard draft names; a draft naming more is 400, at save and at publish"`
	MaxBulkMoveBytes         int           `env:"WORKSPACE_MAX_BULK_MOVE_BYTES" default:"16777216" help:"most bytes of moved workbooks and reports (meta, calculated fields and dashboards, as stored) one move answers with; an item past it is not moved and fails 413 (the first item always moves)"`
	DashboardVersionsKept    int           `env:"WORKSPACE_DASHBOARD_VERSIONS_KEPT" default:"50" help:"published versions of one workbook's dashboard kept for its version history (list and restore); the publish past it removes the oldest"`
	MaxRecursiveDelete       int           `env:"WORKSPACE_MAX_RECURSIVE_DELETE_ITEMS" default:"10000" help:"most items (the folder, the folders below it and their workbooks and reports) one DELETE of a folder with recursive=true sends to the trash; a larger subtree is 400 recursive_delete_limit and nothing is trashed"`
	TrashRetention           time.Duration `env:"WORKSPACE_TRASH_RETENTION" default:"720h" help:"how long deleted items stay in the trash before the retention sweep purges them for good (0: kept until purged)"`
	TrashSweepInterval       time.Duration `env:"WORKSPACE_TRASH_SWEEP_INTERVAL" default:"1h" help:"how often each replica runs the retention sweep of the trash (bounded batches; replicas may sweep at once)"`
	MaxInFlightPerAccount    int           `env:"WORKSPACE_MAX_INFLIGHT_PER_ACCOUNT" default:"8" help:"requests of one account a replica runs at once per expensive route class (bulk move, publish, bulk delete, the trash's restore and purge, import); past it 429 concurrency_limit with Retry-After, before the body is read (0: unbounded)"`
	MaxImportBytes           int64         `env:"WORKSPACE_IMPORT_MAX_BYTES" default:"67108864" help:"largest import request body (POST .../workspace/import), read as a stream and never held whole; past it 413 too_large, nothing written (the gateway bounds it by BODY_LIMIT_DBT_SYNC, which must not be lower)"`
	MaxImportItems           int           `env:"WORKSPACE_IMPORT_MAX_ITEMS" default:"10000" help:"most folders, reports and workbooks one imported bundle holds; one more is 413 too_large, nothing written"`
	MaxExportItems           int           `env:"WORKSPACE_EXPORT_MAX_ITEMS" default:"10000" help:"most folders, reports and workbooks one export writes; past it the export is 413 too_large before its first byte (export a folder at a time)"`
	MaxExportBytes           int64         `env:"WORKSPACE_EXPORT_MAX_BYTES" default:"67108864" help:"most bytes one export writes, estimated from the items' stored sizes before its first byte; past it 413 too_large (export a folder at a time)"`
	NATSURL                  string        `env:"NATS_URL" default:"nats://127.0.0.1:4223" secret:"true" help:"NATS with JetStream: the AUDIT stream the service's audit events go to, embed-svc's viewer lookups and the dashboard reach the service answers (outside the local stack it carries the user and password: nats://user:password@host:4222)"`
	EmbedViewerTimeout       time.Duration `env:"EMBED_VIEWER_LOOKUP_TIMEOUT" default:"2s" help:"how long an embed viewer's request waits for embed-svc's answer of the viewer's current groups; past it the answer is 503"`
	IdentityLookupTimeout    time.Duration `env:"IDENTITY_LOOKUP_TIMEOUT" default:"2s" help:"how long a promotion waits for the gateway's answer to the identity lookup of its target deployment (whose account it is); past it the answer is 503"`
	MaxDuplicateItems        int           `env:"WORKSPACE_MAX_DUPLICATE_ITEMS" default:"1000" help:"folders, workbooks and reports one duplicate (of a workbook with its reports, or of a folder's subtree) creates; a duplicate past it is 400 duplicate_limit, with nothing created"`
	publish.Config
	idempotency.Settings
}

// Limits are the domain's limits as configured.
func (c Config) Limits() workspace.Limits {
	return workspace.Limits{ItemsPerDeployment: c.MaxItemsPerDeployment, MetaBytes: c.MaxMetaBytes, Favorites: c.MaxFavorites,
		SearchScan: c.MaxSearchScan, ListScan: c.MaxListScan, CalculatedFieldsBytes: c.MaxCalculatedFieldsBytes, DraftBytes: c.MaxDraftBytes,
		PublishedBytes: c.MaxPublishedBytes, Grants: c.MaxFolderGrants, EmbedAccessEntries: c.MaxEmbedAccessEntries, DashboardReports: c.MaxDashboardReports, MoveAnswerBytes: c.MaxBulkMoveBytes,
		DashboardVersionsKept: c.DashboardVersionsKept, RecursiveDeleteItems: c.MaxRecursiveDelete, DuplicateItems: c.MaxDuplicateItems,
		ImportBytes: c.MaxImportBytes, ImportItems: c.MaxImportItems, ExportItems: c.MaxExportItems, ExportBytes: c.MaxExportBytes}
}

// Load reads the configuration from the environment.
func Load() (Config, error) {
	var c Config
	err := config.Load(&c)
	return c, err
}
