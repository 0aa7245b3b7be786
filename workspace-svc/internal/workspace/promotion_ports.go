package workspace

import (
	"context"
	"errors"
	"time"
)

// Promotion is one promotion of a workbook into another deployment, as its history
// lists it: who, when, where to, the hashes and what it did.
type Promotion struct {
	ID                 int64
	DeploymentID       int64 // the source deployment
	WorkbookID         int64 // the source workbook
	TargetDeploymentID int64
	TargetFolderID     int64 // where the target workbook is (0: the root)
	TargetWorkbookID   int64
	By                 int64
	At                 time.Time
	SourceHash         string
	TargetHash         string // the target's hash before the promotion ("": there was none)
	Result             string // PromotionCreated, PromotionUpdated or PromotionUnchanged
	Published          bool   // the target was published by it
	Reports            []PromotedReport
}

// PromotedReport is one report that went along with a promotion.
type PromotedReport struct {
	SourceID int64
	TargetID int64
	Action   string // create, update, unchanged
}

// PromotionLink is what a deployment's workbook has become in one target deployment: the
// target workbook and, per source report that went along, its target report. It is what
// finds the target again at the next promotion, so ids, slug and published publicId stay.
type PromotionLink struct {
	Workbook int64
	Reports  map[int64]int64
}

// PromotionKey is a position in a workbook's promotion history, newest first.
type PromotionKey struct {
	At time.Time
	ID int64
}

// PromotionStore keeps the promotion history and links. Every write is one document.
type PromotionStore interface {
	// PromotionLink returns the link of workbook (of deploymentID) into target; nil when none.
	PromotionLink(ctx context.Context, deploymentID, workbook, target int64) (*PromotionLink, error)
	// LinkPromotionWorkbook makes id the link's target workbook if the link's is still
	// was (0: no link yet, which it creates) and answers the link as it is then: when
	// another promotion got in first, with its workbook.
	LinkPromotionWorkbook(ctx context.Context, deploymentID, workbook, target, was, id int64) (*PromotionLink, error)
	// LinkPromotionReport makes id the target of source report if the link's is still
	// was (0: none recorded yet) and answers the link as it is then. The link exists.
	LinkPromotionReport(ctx context.Context, deploymentID, workbook, target, report, was, id int64) (*PromotionLink, error)
	// AddPromotion records one promotion in the source workbook's history.
	AddPromotion(ctx context.Context, pr *Promotion) error
	// Promotions returns at most limit promotions of workbook (of deploymentID), newest first (at,
	// then id, descending), after after (nil: from the newest).
	Promotions(ctx context.Context, deploymentID, workbook int64, after *PromotionKey, limit int) ([]*Promotion, error)
}

// DeploymentInfo is whose a deployment is, as the identity store knows it.
type DeploymentInfo struct {
	ID        int64
	AccountID int64
}

// Deployments answers whose a deployment is: the identity store's, which the gateway
// owns and answers for over NATS (libs/identity/lookup). workspace-svc reads none of its
// collections.
type Deployments interface {
	// Deployment returns deployment id; ErrNoSuchDeployment when there is none, and an
	// errs.ErrUnavailable error when the identity store cannot be asked.
	Deployment(ctx context.Context, id int64) (DeploymentInfo, error)
}

// ErrNoSuchDeployment is a deployment the identity store does not know.
var ErrNoSuchDeployment = errors.New("no such deployment")
