package mongostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// promotionColls are the promotion history (promotions: one document per promotion, by
// id, listed per source workbook newest first) and the links (promotionlinks: one
// document per source workbook and target deployment, {_id: "dep:workbook:target", wb,
// reports: {"<source report>": <target report>}}), each written one document at a time.
type promotionColls struct {
	history *mongo.Collection
	links   *mongo.Collection
}

func newPromotionColls(db *mongo.Database) promotionColls {
	return promotionColls{history: db.Collection("promotions"), links: db.Collection("promotionlinks")}
}

// promotionIndex serves a workbook's history, newest first, and its cursor.
const promotionIndex = "dep_1_workbook_1_at_1__id_1"

func (s *Store) ensurePromotionIndexes(ctx context.Context) error {
	return ensure(ctx, s.promo.history, []index{{promotionIndex, bson.D{{Key: "dep", Value: 1}, {Key: "workbook", Value: 1},
		{Key: "at", Value: 1}, {Key: "_id", Value: 1}}}})
}

type promotedReportDoc struct {
	Source int64  `bson:"s"`
	Target int64  `bson:"t"`
	Action string `bson:"a"`
}

type promotionDoc struct {
	ID             int64               `bson:"_id"`
	DeploymentID   int64               `bson:"dep"`
	Workbook       int64               `bson:"workbook"`
	Target         int64               `bson:"target"`
	TargetFolder   int64               `bson:"targetFolder"`
	TargetWorkbook int64               `bson:"targetWorkbook"`
	By             int64               `bson:"by"`
	At             time.Time           `bson:"at"`
	SourceHash     string              `bson:"sourceHash"`
	TargetHash     string              `bson:"targetHash,omitempty"`
	Result         string              `bson:"result"`
	Published      bool                `bson:"published"`
	Reports        []promotedReportDoc `bson:"reports"`
}

type linkDoc struct {
	ID      string           `bson:"_id"`
	WB      int64            `bson:"wb"`
	Reports map[string]int64 `bson:"reports"`
}

func (d *linkDoc) link() *workspace.PromotionLink {
	l := &workspace.PromotionLink{Workbook: d.WB, Reports: make(map[int64]int64, len(d.Reports))}
	for k, v := range d.Reports {
		if id, err := strconv.ParseInt(k, 10, 64); err == nil {
			l.Reports[id] = v
		}
	}
	return l
}

func linkID(deploymentID, workbook, target int64) string {
	return fmt.Sprintf("%d:%d:%d", deploymentID, workbook, target)
}

// PromotionLink returns the link of workbook into target.
func (s *Store) PromotionLink(ctx context.Context, deploymentID, workbook, target int64) (*workspace.PromotionLink, error) {
	var d linkDoc
	err := s.promo.links.FindOne(ctx, bson.D{{Key: "_id", Value: linkID(deploymentID, workbook, target)}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("find promotion link", err)
	}
	return d.link(), nil
}

// LinkPromotionWorkbook sets the link's workbook to id if it is still was (0: creates
// the link), then reads the link as it is.
func (s *Store) LinkPromotionWorkbook(ctx context.Context, deploymentID, workbook, target, was, id int64) (*workspace.PromotionLink, error) {
	k := linkID(deploymentID, workbook, target)
	var err error
	if was == 0 {
		_, err = s.promo.links.UpdateOne(ctx, bson.D{{Key: "_id", Value: k}},
			bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "wb", Value: id}, {Key: "reports", Value: bson.D{}}}}}, options.UpdateOne().SetUpsert(true))
		if mongox.IsDuplicateKey(err) { // two first promotions raced: the other one made the link
			err = nil
		}
	} else {
		_, err = s.promo.links.UpdateOne(ctx, bson.D{{Key: "_id", Value: k}, {Key: "wb", Value: was}}, bson.D{{Key: "$set", Value: bson.D{{Key: "wb", Value: id}}}})
	}
	if err != nil {
		return nil, wrap("link promotion workbook", err)
	}
	return s.PromotionLink(ctx, deploymentID, workbook, target)
}

// LinkPromotionReport sets the link's target of report to id if it is still was (0:
// none), then reads the link as it is.
func (s *Store) LinkPromotionReport(ctx context.Context, deploymentID, workbook, target, report, was, id int64) (*workspace.PromotionLink, error) {
	field := "reports." + strconv.FormatInt(report, 10)
	cond := bson.D{{Key: "$exists", Value: false}}
	if was != 0 {
		cond = bson.D{{Key: "$eq", Value: was}}
	}
	_, err := s.promo.links.UpdateOne(ctx, bson.D{{Key: "_id", Value: linkID(deploymentID, workbook, target)}, {Key: field, Value: cond}},
		bson.D{{Key: "$set", Value: bson.D{{Key: field, Value: id}}}})
	if err != nil {
		return nil, wrap("link promotion report", err)
	}
	return s.PromotionLink(ctx, deploymentID, workbook, target)
}

// AddPromotion records a promotion.
func (s *Store) AddPromotion(ctx context.Context, pr *workspace.Promotion) error {
	d := promotionDoc{ID: pr.ID, DeploymentID: pr.DeploymentID, Workbook: pr.WorkbookID, Target: pr.TargetDeploymentID, TargetFolder: pr.TargetFolderID,
		TargetWorkbook: pr.TargetWorkbookID, By: pr.By, At: pr.At, SourceHash: pr.SourceHash, TargetHash: pr.TargetHash, Result: pr.Result,
		Published: pr.Published, Reports: make([]promotedReportDoc, len(pr.Reports))}
	for i, r := range pr.Reports {
		d.Reports[i] = promotedReportDoc{Source: r.SourceID, Target: r.TargetID, Action: r.Action}
	}
	_, err := s.promo.history.InsertOne(ctx, d)
	return wrap("add promotion", err)
}

// Promotions returns a workbook's promotions, newest first (at, then id, descending).
func (s *Store) Promotions(ctx context.Context, deploymentID, workbook int64, after *workspace.PromotionKey, limit int) ([]*workspace.Promotion, error) {
	filter := bson.D{{Key: "dep", Value: deploymentID}, {Key: "workbook", Value: workbook}}
	if after != nil {
		filter = append(filter, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: "at", Value: bson.D{{Key: "$lt", Value: after.At}}}},
			bson.D{{Key: "at", Value: after.At}, {Key: "_id", Value: bson.D{{Key: "$lt", Value: after.ID}}}},
		}})
	}
	cur, err := s.promo.history.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "at", Value: -1}, {Key: "_id", Value: -1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, wrap("find promotions", err)
	}
	var docs []promotionDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap("find promotions", err)
	}
	out := make([]*workspace.Promotion, len(docs))
	for i, d := range docs {
		pr := &workspace.Promotion{ID: d.ID, DeploymentID: d.DeploymentID, WorkbookID: d.Workbook, TargetDeploymentID: d.Target, TargetFolderID: d.TargetFolder,
			TargetWorkbookID: d.TargetWorkbook, By: d.By, At: d.At.UTC(), SourceHash: d.SourceHash, TargetHash: d.TargetHash, Result: d.Result,
			Published: d.Published, Reports: make([]workspace.PromotedReport, len(d.Reports))}
		for j, r := range d.Reports {
			pr.Reports[j] = workspace.PromotedReport{SourceID: r.Source, TargetID: r.Target, Action: r.Action}
		}
		out[i] = pr
	}
	return out, nil
}
