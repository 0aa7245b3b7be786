package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/analyticsco/platform/libs/httpx"
)

func (s *service) renderFolder(ctx context.Context, r *request, d *Item) (Folder, error) {
	users, fav, err := s.ownersAndFavorites(ctx, r, []*Item{d})
	if err != nil {
		return Folder{}, err
	}
	isFav := fav[d.ID]
	return Folder{ID: d.ID, DeploymentID: d.DeploymentID, Name: d.Name, Position: d.Position, Type: TypeFolder, Key: renderKey(d), Version: d.Version,
		CreatedAt: formatTime(d.CreatedAt), UpdatedAt: formatTime(d.UpdatedAt), CreatedBy: d.CreatedBy, UpdatedBy: d.UpdatedBy,
		ParentID: optionalID(d.Parent), FolderPath: r.tree.path(r.p, d.Parent), User: owner(users, d.CreatedBy), IsFavorite: &isFav}, nil
}

// render serializes items in the Workbook shape, each at its folder's path in the tree
// the request read, loading their creators and the caller's favorites among them at once.
func (s *service) render(ctx context.Context, r *request, docs []*Item) ([]Workbook, error) {
	users, fav, err := s.ownersAndFavorites(ctx, r, docs)
	if err != nil {
		return nil, err
	}
	out := make([]Workbook, len(docs))
	for i, d := range docs {
		out[i] = renderItem(users, d, r.tree.path(r.p, d.Parent))
		isFav := fav[d.ID]
		out[i].IsFavorite = &isFav
	}
	return out, nil
}

// renderMoved serializes moved items in the Workbook shape as their moves left them:
// each at the path its move recorded, not at one the request's tree holds now.
func (s *service) renderMoved(ctx context.Context, r *request, moved []movedItem) ([]Workbook, error) {
	docs := make([]*Item, len(moved))
	for i, m := range moved {
		docs[i] = m.d
	}
	users, fav, err := s.ownersAndFavorites(ctx, r, docs)
	if err != nil {
		return nil, err
	}
	out := make([]Workbook, len(moved))
	for i, m := range moved {
		out[i] = renderItem(users, m.d, m.path)
		isFav := fav[m.d.ID]
		out[i].IsFavorite = &isFav
	}
	return out, nil
}

// renderSummaries renders listed items in the summary shape, loading their creators at
// once.
func (s *service) renderSummaries(ctx context.Context, r *request, docs []*Item) ([]ItemSummary, error) {
	t := r.tree
	users, fav, err := s.ownersAndFavorites(ctx, r, docs)
	if err != nil {
		return nil, err
	}
	out := make([]ItemSummary, len(docs))
	for i, d := range docs {
		createdBy, isFav := d.CreatedBy, fav[d.ID]
		out[i] = ItemSummary{ID: d.ID, DeploymentID: d.DeploymentID, Name: d.Name, Type: d.Type, Key: renderKey(d), Version: d.Version, Position: d.Position,
			CreatedAt: formatTime(d.CreatedAt), UpdatedAt: formatTime(d.UpdatedAt), CreatedBy: d.CreatedBy, UpdatedBy: d.UpdatedBy,
			UserID: &createdBy, User: owner(users, d.CreatedBy), FolderID: optionalID(d.Parent), FolderPath: t.path(r.p, d.Parent), Slug: slugOf(d), IsFavorite: &isFav}
	}
	return out, nil
}

// ownersAndFavorites loads what every rendering of docs shows besides the documents:
// their creators (the `user` field) and which of them the caller marked a favorite. An
// item the request itself created is nobody's favorite yet: it is not asked about.
func (s *service) ownersAndFavorites(ctx context.Context, r *request, docs []*Item) (map[int64]User, map[int64]bool, error) {
	users, err := s.usersFor(ctx, r, creators(docs))
	if err != nil {
		return nil, nil, err
	}
	var ids []int64
	for _, d := range docs {
		if d.ID != r.created {
			ids = append(ids, d.ID)
		}
	}
	if len(ids) == 0 {
		return users, map[int64]bool{}, nil
	}
	fav, err := s.store.FavoriteSet(ctx, r.deploymentID, r.p.User.ID, ids)
	if err != nil {
		return nil, nil, err
	}
	return users, fav, nil
}

// renderItem is d in the Workbook shape, in its folder d.Parent at path.
func renderItem(users map[int64]User, d *Item, path []FolderPathEntry) Workbook {
	createdBy := d.CreatedBy
	w := Workbook{ID: d.ID, DeploymentID: d.DeploymentID, Name: d.Name, Type: d.Type, Key: renderKey(d), Version: d.Version,
		Meta: rawOrEmpty(d.Meta), CalculatedFields: rawOrEmpty(d.CalculatedFields),
		CreatedAt: formatTime(d.CreatedAt), UpdatedAt: formatTime(d.UpdatedAt), CreatedBy: d.CreatedBy,
		UserID: &createdBy, User: owner(users, d.CreatedBy), FolderID: optionalID(d.Parent), FolderPath: path}
	w.Slug = slugOf(d)
	w.DashboardDraft = d.Draft
	if d.Published != nil {
		w.PublishedDashboard = d.Published
		cfg := d.Published.Config
		w.DashboardPublished = &cfg
	}
	return w
}

// renderMovedWithoutOwners renders moved items as renderMoved does, with no user or
// favorite lookup (their `user` and `isFavorite` are null).
func renderMovedWithoutOwners(moved []movedItem) []Workbook {
	out := make([]Workbook, len(moved))
	for i, m := range moved {
		out[i] = renderItem(nil, m.d, m.path)
	}
	return out
}

func formatTime(t time.Time) string { return t.UTC().Format(httpx.TimeLayout) }

func optionalID(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

func owner(users map[int64]User, id int64) *ResourceOwner {
	u, ok := users[id]
	if !ok || u.ID == 0 {
		return nil
	}
	o := &ResourceOwner{ID: u.ID, Email: u.Email}
	if u.FirstName != "" {
		o.FirstName = &u.FirstName
	}
	if u.Picture != "" {
		o.Picture = &u.Picture
	}
	return o
}

func creators(docs []*Item) []int64 {
	var ids []int64
	for _, d := range docs {
		if !containsID(ids, d.CreatedBy) {
			ids = append(ids, d.CreatedBy)
		}
	}
	return ids
}

var emptyObject = json.RawMessage(`{}`)

func rawOrEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return emptyObject
	}
	return raw
}

var slugUnsafe = regexp.MustCompile(`[^a-z0-9]+`)

// slugOf is `<name-slug>-<id>` for workbooks and reports, nil for folders.
func slugOf(d *Item) *string {
	if d.Type == TypeFolder {
		return nil
	}
	slug := strings.Trim(slugUnsafe.ReplaceAllString(strings.ToLower(d.Name), "-"), "-")
	slug = strings.TrimPrefix(slug+"-", "-") + fmt.Sprint(d.ID)
	return &slug
}
