package mongostore

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// versionDoc is one kept version of a workbook's published dashboard, in
// dashboard_versions: {_id: versionId, dep, wb, number, committed, ...}. A record is
// written pending (committed false) before the workbook's published dashboard, and
// committed once the workbook is known to have reached it (workspace.VersionStore).
type versionDoc struct {
	ID           int64     `bson:"_id"`
	DeploymentID int64     `bson:"dep"`
	Workbook     int64     `bson:"wb"`
	Number       int64     `bson:"number"`
	Committed    bool      `bson:"committed"`
	Title        *string   `bson:"title,omitempty"`
	AllowEmbed   bool      `bson:"allowEmbed"`
	PublishedAt  time.Time `bson:"publishedAt"`
	PublishedBy  int64     `bson:"publishedBy"`
	RestoredFrom int64     `bson:"restoredFrom,omitempty"`
	// Dashboard is the published dashboard encoded, as items keep it (bounded by the
	// published dashboard's limit).
	Dashboard string `bson:"dashboard"`
}

// versionIndex serves every query of dashboard_versions but those by _id: a workbook's
// versions in number order (the listing walks it backwards, newest first), one version
// by number, the pending check and the pruning of the oldest.
const versionIndex = "dep_1_wb_1_number_1"

var versionIndexes = []index{
	{versionIndex, bson.D{{Key: "dep", Value: 1}, {Key: "wb", Value: 1}, {Key: "number", Value: 1}}},
}

// versionSummary is what a listing reads: every field but the dashboard.
var versionSummary = bson.D{{Key: "dashboard", Value: 0}}

func (d *versionDoc) version() *workspace.DashboardVersion {
	v := &workspace.DashboardVersion{VersionID: d.ID, DeploymentID: d.DeploymentID, WorkbookID: d.Workbook, VersionNumber: d.Number,
		Title: d.Title, AllowEmbed: d.AllowEmbed, PublishedAt: d.PublishedAt, PublishedBy: d.PublishedBy, RestoredFrom: d.RestoredFrom}
	if d.Dashboard != "" {
		v.Dashboard = decodeJSON[workspace.Dashboard](d.Dashboard)
	}
	return v
}

// InsertDashboardVersion stores v pending; a versionId stored already was handed out
// twice (ErrIDTaken, the id block dropped).
func (s *Store) InsertDashboardVersion(ctx context.Context, v *workspace.DashboardVersion) error {
	dash, err := encodeJSON("dashboard version", v.Dashboard)
	if err != nil {
		return err
	}
	doc := versionDoc{ID: v.VersionID, DeploymentID: v.DeploymentID, Workbook: v.WorkbookID, Number: v.VersionNumber, Title: v.Title,
		AllowEmbed: v.AllowEmbed, PublishedAt: v.PublishedAt, PublishedBy: v.PublishedBy, RestoredFrom: v.RestoredFrom, Dashboard: dash}
	_, err = s.versions.InsertOne(ctx, doc)
	if mongox.IsDuplicateKey(err) {
		return s.idTaken("insert dashboard version", v.VersionID)
	}
	return wrap("insert dashboard version", err)
}

// CommitDashboardVersion commits the record by _id, then deletes the workbook's records
// numbered keep or more below it: a delete bounded on versionIndex.
func (s *Store) CommitDashboardVersion(ctx context.Context, deploymentID, workbook, versionID, number int64, keep int) (bool, error) {
	res, err := s.versions.UpdateOne(ctx, bson.D{{Key: "_id", Value: versionID}, {Key: "dep", Value: deploymentID}, {Key: "wb", Value: workbook},
		{Key: "number", Value: number}}, bson.D{{Key: "$set", Value: bson.D{{Key: "committed", Value: true}}}})
	if err != nil {
		return false, wrap("commit dashboard version", err)
	}
	if res.MatchedCount == 0 {
		return false, nil
	}
	if below := number - int64(keep); below >= 1 {
		_, err = s.versions.DeleteMany(ctx, bson.D{{Key: "dep", Value: deploymentID}, {Key: "wb", Value: workbook},
			{Key: "number", Value: bson.D{{Key: "$lte", Value: below}}}})
		if err != nil {
			return true, wrap("prune dashboard versions", err)
		}
	}
	return true, nil
}

// DropDashboardVersion deletes the record if it is still pending.
func (s *Store) DropDashboardVersion(ctx context.Context, deploymentID, workbook, versionID int64) error {
	_, err := s.versions.DeleteOne(ctx, bson.D{{Key: "_id", Value: versionID}, {Key: "dep", Value: deploymentID}, {Key: "wb", Value: workbook},
		{Key: "committed", Value: false}})
	return wrap("drop dashboard version", err)
}

// PendingDashboardVersion reports whether a pending record has the number.
func (s *Store) PendingDashboardVersion(ctx context.Context, deploymentID, workbook, number int64) (bool, error) {
	err := s.versions.FindOne(ctx, bson.D{{Key: "dep", Value: deploymentID}, {Key: "wb", Value: workbook}, {Key: "number", Value: number},
		{Key: "committed", Value: false}}, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	return err == nil, wrap("find pending dashboard version", err)
}

// DashboardVersions returns committed versions numbered below before, newest first:
// versionIndex walked backwards from before, without the dashboards.
func (s *Store) DashboardVersions(ctx context.Context, deploymentID, workbook, before int64, limit int) ([]*workspace.DashboardVersion, error) {
	filter := bson.D{{Key: "dep", Value: deploymentID}, {Key: "wb", Value: workbook}}
	if before > 0 {
		filter = append(filter, bson.E{Key: "number", Value: bson.D{{Key: "$lt", Value: before}}})
	}
	filter = append(filter, bson.E{Key: "committed", Value: true})
	cur, err := s.versions.Find(ctx, filter, options.Find().SetProjection(versionSummary).
		SetSort(bson.D{{Key: "number", Value: -1}}).SetLimit(int64(limit)).SetBatchSize(oneBatch(limit)))
	if err != nil {
		return nil, wrap("list dashboard versions", err)
	}
	var docs []*versionDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap("list dashboard versions", err)
	}
	out := make([]*workspace.DashboardVersion, len(docs))
	for i, d := range docs {
		out[i] = d.version()
	}
	return out, nil
}

// DashboardVersion returns the committed version with the number, in full.
func (s *Store) DashboardVersion(ctx context.Context, deploymentID, workbook, number int64) (*workspace.DashboardVersion, error) {
	var d versionDoc
	err := s.versions.FindOne(ctx, bson.D{{Key: "dep", Value: deploymentID}, {Key: "wb", Value: workbook}, {Key: "number", Value: number},
		{Key: "committed", Value: true}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("read dashboard version", err)
	}
	return d.version(), nil
}

// DeleteDashboardVersions deletes every record of the workbook.
func (s *Store) DeleteDashboardVersions(ctx context.Context, deploymentID, workbook int64) error {
	_, err := s.versions.DeleteMany(ctx, bson.D{{Key: "dep", Value: deploymentID}, {Key: "wb", Value: workbook}})
	return wrap("delete dashboard versions", err)
}
