package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// PutOutcome is what a create-or-replace by key did.
type PutOutcome string

// The outcomes of a PUT by key.
const (
	PutCreated   PutOutcome = "created"   // no live item had the key: one was created (201)
	PutUpdated   PutOutcome = "updated"   // the item with the key was changed to the body
	PutUnchanged PutOutcome = "unchanged" // the item with the key was the body already: nothing written
)

// PutItemInput is the full desired state of a workbook or report (PUT by key): an
// omitted optional part is cleared (meta and calculatedFields to {}, the draft to none).
type PutItemInput struct {
	Name             string
	FolderID         int64 // 0: the root
	Meta             json.RawMessage
	CalculatedFields json.RawMessage
	DashboardDraft   *DashboardConfig
	ExpectedVersion  *int64 // set: the item must exist at this version
}

// PutFolderInput is the full desired state of a folder (PUT by key). An omitted
// position keeps the folder's (a new folder's is placed as on create).
type PutFolderInput struct {
	Name            string
	ParentID        int64 // 0: the root
	Position        *float64
	ExpectedVersion *int64
}

// KeyService creates or replaces items by their key.
type KeyService interface {
	// PutItemByKey makes the live workbook or report of typ with key what in says:
	// created when none has the key, else moved (when in.FolderID is elsewhere, by the
	// move's rules) and changed; nothing is written when it is in's state already.
	PutItemByKey(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, key string, in PutItemInput) (Workbook, PutOutcome, error)
	// PutFolderByKey does the same for the folder with key.
	PutFolderByKey(ctx context.Context, p *identity.Principal, deploymentID int64, key string, in PutFolderInput) (Folder, PutOutcome, error)
}

// putAttempts bounds a PUT that keeps meeting a concurrent create of its key.
const putAttempts = 3

func (s *service) PutItemByKey(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, key string, in PutItemInput) (Workbook, PutOutcome, error) {
	if err := ValidKey(key); err != nil {
		return Workbook{}, "", err
	}
	name, err := validName("name", in.Name)
	if err != nil {
		return Workbook{}, "", err
	}
	in.Name = name
	if in.DashboardDraft != nil && typ != TypeWorkbook {
		return Workbook{}, "", errs.Invalidf("only workbooks have a dashboardDraft")
	}
	if err := in.DashboardDraft.Validate("dashboardDraft"); err != nil {
		return Workbook{}, "", err
	}
	if err := s.checkSizes(in.Meta, in.CalculatedFields, in.DashboardDraft); err != nil {
		return Workbook{}, "", err
	}
	for range putAttempts {
		held, err := s.store.ItemsByKey(ctx, deploymentID, typ, []string{key}, 0)
		if err != nil {
			return Workbook{}, "", err
		}
		cur := held[key]
		if cur == nil {
			if in.ExpectedVersion != nil {
				return Workbook{}, "", errs.New(errs.Conflict, "no %s has the key %q, so it is at no version (expectedVersion %d)",
					typ.lower(), key, *in.ExpectedVersion).WithCode(errs.CodeVersionConflict)
			}
			w, err := s.CreateItem(ctx, p, deploymentID, typ, CreateItemInput{Name: in.Name, FolderID: in.FolderID, Meta: in.Meta,
				CalculatedFields: in.CalculatedFields, DashboardDraft: in.DashboardDraft, Key: key})
			if isCode(err, errs.CodeKeyTaken) {
				continue // created meanwhile: replace it
			}
			if err != nil {
				return Workbook{}, "", err
			}
			return w, PutCreated, nil
		}
		w, outcome, err := s.replaceItem(ctx, p, deploymentID, cur, in)
		if errors.Is(err, errKeyGone) {
			continue // deleted meanwhile: create it
		}
		return w, outcome, err
	}
	return Workbook{}, "", errs.Unavailablef("the %s with key %q kept changing during the request; retry", typ.lower(), key)
}

// errKeyGone: the item found by key went away before it could be replaced.
var errKeyGone = errors.New("the item with the key is gone")

// replaceItem makes cur what in says.
func (s *service) replaceItem(ctx context.Context, p *identity.Principal, deploymentID int64, cur *Item, in PutItemInput) (Workbook, PutOutcome, error) {
	typ := cur.Type
	r, d, err := s.itemForAccess(ctx, p, deploymentID, typ, cur.ID, LevelEdit, "change it")
	if isKind(err, errs.NotFound) {
		return Workbook{}, "", errKeyGone
	}
	if err != nil {
		return Workbook{}, "", err
	}
	if err := checkVersion(d, in.ExpectedVersion); err != nil {
		return Workbook{}, "", err
	}
	moved := false
	if in.FolderID != d.Parent {
		if _, err := s.Move(ctx, p, deploymentID, ItemRef{Type: typ, ID: d.ID}, in.FolderID); err != nil {
			return Workbook{}, "", err
		}
		moved = true
		// Where it is now, checked again there.
		if r, d, err = s.itemForAccess(ctx, p, deploymentID, typ, cur.ID, LevelEdit, "change it"); err != nil {
			return Workbook{}, "", err
		}
		if in.ExpectedVersion != nil && d.Version != *in.ExpectedVersion+1 {
			return Workbook{}, "", versionConflict(typ, d.ID, *in.ExpectedVersion+1, d.Version)
		}
	}
	full, err := s.withParts(ctx, r, d, AllParts, LevelEdit, "change it")
	if err != nil {
		return Workbook{}, "", err
	}
	u := ItemUpdate{}
	if full.Name != in.Name {
		u.Name = &in.Name
	}
	if !sameObject(full.Meta, in.Meta) {
		u.Meta = orEmpty(in.Meta)
	}
	if !sameObject(full.CalculatedFields, in.CalculatedFields) {
		u.CalculatedFields = orEmpty(in.CalculatedFields)
	}
	if !sameDraft(full.Draft, in.DashboardDraft) {
		u.Draft, u.ClearDraft = in.DashboardDraft, in.DashboardDraft == nil
	}
	if u.Name == nil && u.Meta == nil && u.CalculatedFields == nil && u.Draft == nil && !u.ClearDraft {
		out, err := s.render(ctx, r, []*Item{full})
		if err != nil {
			return Workbook{}, "", err
		}
		if moved {
			return out[0], PutUpdated, nil
		}
		return out[0], PutUnchanged, nil
	}
	u.UpdatedAt, u.UpdatedBy = s.now(), p.User.ID
	nd, err := s.store.UpdateItem(ctx, deploymentID, d.ID, typ, ItemPrecondition{Parent: &full.Parent, Version: &full.Version}, u)
	if err != nil {
		return Workbook{}, "", err
	}
	if nd == nil {
		return Workbook{}, "", s.updateRefused(ctx, deploymentID, typ, d.ID, in.ExpectedVersion)
	}
	out, err := s.render(ctx, r, []*Item{nd})
	if err != nil {
		return Workbook{}, "", err
	}
	return out[0], PutUpdated, nil
}

func (s *service) PutFolderByKey(ctx context.Context, p *identity.Principal, deploymentID int64, key string, in PutFolderInput) (Folder, PutOutcome, error) {
	if err := ValidKey(key); err != nil {
		return Folder{}, "", err
	}
	name, err := validName("name", in.Name)
	if err != nil {
		return Folder{}, "", err
	}
	in.Name = name
	for range putAttempts {
		held, err := s.store.ItemsByKey(ctx, deploymentID, TypeFolder, []string{key}, 0)
		if err != nil {
			return Folder{}, "", err
		}
		cur := held[key]
		if cur == nil {
			if in.ExpectedVersion != nil {
				return Folder{}, "", errs.New(errs.Conflict, "no folder has the key %q, so it is at no version (expectedVersion %d)",
					key, *in.ExpectedVersion).WithCode(errs.CodeVersionConflict)
			}
			f, err := s.CreateFolder(ctx, p, deploymentID, CreateFolderInput{Name: in.Name, ParentID: in.ParentID, Position: in.Position, Key: key})
			if isCode(err, errs.CodeKeyTaken) {
				continue
			}
			if err != nil {
				return Folder{}, "", err
			}
			return f, PutCreated, nil
		}
		f, outcome, err := s.replaceFolder(ctx, p, deploymentID, cur, in)
		if errors.Is(err, errKeyGone) {
			continue
		}
		return f, outcome, err
	}
	return Folder{}, "", errs.Unavailablef("the folder with key %q kept changing during the request; retry", key)
}

// replaceFolder makes cur what in says.
func (s *service) replaceFolder(ctx context.Context, p *identity.Principal, deploymentID int64, cur *Item, in PutFolderInput) (Folder, PutOutcome, error) {
	_, d, err := s.folderForRead(ctx, p, deploymentID, cur.ID, LevelEdit, "change it")
	if isKind(err, errs.NotFound) {
		return Folder{}, "", errKeyGone
	}
	if err != nil {
		return Folder{}, "", err
	}
	if err := checkVersion(d, in.ExpectedVersion); err != nil {
		return Folder{}, "", err
	}
	moved := false
	if in.ParentID != d.Parent {
		if _, err := s.Move(ctx, p, deploymentID, ItemRef{Type: TypeFolder, ID: d.ID}, in.ParentID); err != nil {
			return Folder{}, "", err
		}
		moved = true
	}
	r, now, err := s.folderForRead(ctx, p, deploymentID, d.ID, LevelEdit, "change it")
	if err != nil {
		return Folder{}, "", err
	}
	if moved && in.ExpectedVersion != nil && now.Version != *in.ExpectedVersion+1 {
		return Folder{}, "", versionConflict(TypeFolder, d.ID, *in.ExpectedVersion+1, now.Version)
	}
	u := ItemUpdate{}
	if now.Name != in.Name {
		u.Name = &in.Name
	}
	if in.Position != nil && *in.Position != now.Position {
		u.Position = in.Position
	}
	if u.Name == nil && u.Position == nil {
		f, err := s.renderFolder(ctx, r, now)
		if moved {
			return f, PutUpdated, err
		}
		return f, PutUnchanged, err
	}
	u.UpdatedAt, u.UpdatedBy = s.now(), p.User.ID
	nd, err := s.store.UpdateItem(ctx, deploymentID, d.ID, TypeFolder, ItemPrecondition{Version: &now.Version}, u)
	if err != nil {
		return Folder{}, "", err
	}
	if nd == nil {
		return Folder{}, "", s.updateRefused(ctx, deploymentID, TypeFolder, d.ID, in.ExpectedVersion)
	}
	if n := r.tree.folders[d.ID]; n != nil {
		n.Name = nd.Name
	}
	f, err := s.renderFolder(ctx, r, nd)
	return f, PutUpdated, err
}

// sameObject compares two JSON objects as stored (none is {}), ignoring insignificant
// whitespace.
func sameObject(a, b json.RawMessage) bool {
	return bytes.Equal(compactObject(a), compactObject(b))
}

func compactObject(raw json.RawMessage) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return []byte("{}")
	}
	var out bytes.Buffer
	if json.Compact(&out, raw) != nil {
		return raw
	}
	return out.Bytes()
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return emptyObject
	}
	return raw
}

// sameDraft compares two drafts as they are stored (JSON).
func sameDraft(a, b *DashboardConfig) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// isCode reports whether err is an errs.Error with code.
func isCode(err error, code string) bool {
	var e *errs.Error
	return errors.As(err, &e) && e.Code == code
}

// isKind reports whether err is an errs.Error of kind k.
func isKind(err error, k errs.Kind) bool {
	var e *errs.Error
	return errors.As(err, &e) && e.Kind == k
}
