package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	mongooptions "go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/wireproxy"
)

// The embed read table: what the viewer's GET /api/v1/embed/dashboards/{publicId} costs
// in a deployment of 10,000 workbooks (and 2,500 folders) whose account has 1,000 embed
// tenants, for a dashboard at folder depth 1 and at depth 8, with 1 grant on its chain
// (the deciding one, on the topmost folder) and with 200 (199 that do not match the
// viewer, spread over the workbook and its folders, and the deciding one). The decision
// walks every object of the chain and every entry; the store commands per request must
// not grow with either: one workbook read by {dep, publicId}, its parent, its
// ancestors, the root's grants and the viewer's groups (one NATS request to embed-svc,
// which reads the user once).
func init() {
	registerTable(&Table{
		Name: "embed-read",
		Title: fmt.Sprintf("the embed viewer's dashboard read (GET /api/v1/embed/dashboards/{publicId}) in a deployment of %d workbooks, %d embed tenants, at folder depth 1 and 8 with 1 and 200 grants on the chain",
			embedReadWorkbooks, embedReadTenants),
		Baseline: "d1g1",
		Scenarios: []Scenario{
			{Key: "d1g1", Name: "depth 1, 1 grant", Setup: setupEmbedRead(1, 1)},
			{Key: "d1g200", Name: "depth 1, 200 grants", Setup: setupEmbedRead(1, 200)},
			{Key: "d8g1", Name: "depth 8, 1 grant", Setup: setupEmbedRead(8, 1)},
			{Key: "d8g200", Name: "depth 8, 200 grants", Setup: setupEmbedRead(8, 200)},
			{Key: "list", Name: "listing, first=20 (d8g200)", Setup: setupEmbedList},
		},
		Ratios: []Ratio{{"d1g200", "d1g1"}, {"d8g1", "d1g1"}, {"d8g200", "d1g1"}},
		Notes:  embedReadNotes,
		Legend: append(append([]string{}, defaultLegend...),
			"        cpu_us/req sums every process of the platform (gateway, workspace-svc, embed-svc, devstack's FerretDB and",
			"        proxy, PostgreSQL, Redis). Counts under the table: 20 serial requests per row, the processes' command",
			"        monitors; examined = the wire proxy's planner model of what MongoDB would read under the declared indexes."),
	})
}

const (
	embedReadWorkbooks = 10_000
	embedReadTenants   = 1_000
	// embedReadPublished dashboards besides the measured ones are published with grants
	// for tenants of the account, so the {dep, publicId} lookup has neighbours.
	embedReadPublished = 100
	embedReadWorkers   = 8
	embedReadTenant    = "bench-tenant-0000"
	embedReadGroup     = "bench-readers"
)

// embedReadStack is the table's platform with its deployment filled.
type embedReadStack struct {
	p      platformInfo
	client *mongo.Client
	dep    int64
	bearer string
	key    string
	api    *apiClient
	setup  string // how long the fill and the tenants took
}

func (e *Env) embedReadStack(ctx context.Context) (*embedReadStack, error) {
	return memo(e, "embed-read-set", func() (*embedReadStack, error) {
		p, err := e.platformWith(ctx, "embed-read")
		if err != nil {
			return nil, err
		}
		s := &embedReadStack{p: p, api: newAPIClient(p.Gateway)}
		if s.client, err = mongo.Connect(mongooptions.Client().ApplyURI(p.Mongo).SetTimeout(10 * time.Minute)); err != nil {
			return nil, err
		}
		e.beforeStop(func() { _ = s.client.Disconnect(context.Background()) })
		acme := p.Seed.Accounts["acme"]
		s.dep, s.bearer, s.key = acme.Deployments[0].ID, acme.Users["admin"].Bearer, acme.APIKeys["admin"]
		start := time.Now()
		items := embedReadWorkbooks + embedReadWorkbooks/4 // a fifth of the items are folders
		logf("embed-read: filling acme's deployment with %d items", items)
		filled, err := devstack.FillWorkspace(ctx, s.client.Database("workspace"), devstack.Fill{Deployment: s.dep, By: acme.Users["admin"].ID, Items: items})
		if err != nil {
			return nil, fmt.Errorf("embed-read: fill: %w", err)
		}
		if filled.Workbooks != embedReadWorkbooks {
			return nil, fmt.Errorf("embed-read: the fill made %d workbooks, want %d", filled.Workbooks, embedReadWorkbooks)
		}
		fillTook := time.Since(start)
		if err := s.api.do(ctx, http.MethodPost, "/api/v1/groups", "Api-Key "+s.key, map[string]any{"name": embedReadGroup}, http.StatusOK, nil); err != nil {
			return nil, err
		}
		logf("embed-read: minting a session in each of %d tenants", embedReadTenants)
		start = time.Now()
		if err := parallel(ctx, embedReadTenants, 8, func(ctx context.Context, i int) error {
			return s.api.do(ctx, http.MethodPost, "/api/v1/embed/generate-session", "Api-Key "+s.key, map[string]any{
				"deploymentId": s.dep, "externalId": fmt.Sprintf("bench-viewer-%04d", i), "embedTenantName": fmt.Sprintf("bench-tenant-%04d", i),
				"groups": []string{embedReadGroup}}, http.StatusOK, nil)
		}); err != nil {
			return nil, fmt.Errorf("embed-read: tenants: %w", err)
		}
		tenantsTook := time.Since(start)
		logf("embed-read: publishing %d more dashboards with grants", embedReadPublished)
		if err := parallel(ctx, embedReadPublished, 4, func(ctx context.Context, i int) error {
			id, _, err := s.publish(ctx, 0, fmt.Sprintf("bench neighbour %d", i))
			if err != nil {
				return err
			}
			return s.grant(ctx, fmt.Sprintf("/workbooks/%d", id), map[string]any{"tenants": []any{
				map[string]any{"embedTenantName": fmt.Sprintf("bench-tenant-%04d", (i+1)%embedReadTenants), "access": "read"}}})
		}); err != nil {
			return nil, fmt.Errorf("embed-read: neighbours: %w", err)
		}
		s.setup = fmt.Sprintf("%d items filled in %s, %d tenants' first sessions in %s", items, fillTook.Round(time.Millisecond),
			embedReadTenants, tenantsTook.Round(time.Millisecond))
		return s, nil
	})
}

// publish creates a workbook with a dashboard draft in folder (0: the root) and
// publishes it with allowEmbed, returning its id and public id.
func (s *embedReadStack) publish(ctx context.Context, folder int64, name string) (int64, string, error) {
	body := map[string]any{"name": name, "dashboardDraft": map[string]any{"kind": "CLASSIC", "title": name, "widgets": []any{}}}
	if folder != 0 {
		body["folderId"] = folder
	}
	var w idResponse
	base := fmt.Sprintf("/api/v1/deployments/%d", s.dep)
	if err := s.api.do(ctx, http.MethodPost, base+"/workbooks", "Bearer "+s.bearer, body, http.StatusOK, &w); err != nil {
		return 0, "", err
	}
	var pub struct {
		PublishedDashboard struct {
			PublicID string `json:"publicId"`
		} `json:"publishedDashboard"`
	}
	err := s.api.do(ctx, http.MethodPost, fmt.Sprintf("%s/workbooks/%d/publish", base, w.ID), "Bearer "+s.bearer, map[string]any{"allowEmbed": true}, http.StatusOK, &pub)
	return w.ID, pub.PublishedDashboard.PublicID, err
}

// grant replaces the grants of the object at path ("/workbooks/1", "/folders/2").
func (s *embedReadStack) grant(ctx context.Context, path string, g map[string]any) error {
	return s.api.do(ctx, http.MethodPut, fmt.Sprintf("/api/v1/deployments/%d%s/embed-access", s.dep, path), "Bearer "+s.bearer, g, http.StatusOK, nil)
}

// viewer mints and exchanges a session of the measured tenant (a member of the
// account's group), named by key.
func (s *embedReadStack) viewer(ctx context.Context, key string) (string, error) {
	var out struct {
		SessionID string `json:"sessionId"`
	}
	if err := s.api.do(ctx, http.MethodPost, "/api/v1/embed/generate-session", "Api-Key "+s.key, map[string]any{
		"deploymentId": s.dep, "externalId": "bench-embed-" + key, "embedTenantName": embedReadTenant, "groups": []string{embedReadGroup}},
		http.StatusOK, &out); err != nil {
		return "", err
	}
	return s.api.exchange(ctx, out.SessionID)
}

// fillers are n grant entries that match no viewer of the measured tenant: other
// tenants' read and none, groups of other names.
func fillers(n, offset int) (tenants, groups []any) {
	for i := range n {
		k := offset + i
		access := "read"
		if k%2 == 1 {
			access = "none"
		}
		if k%3 == 0 {
			groups = append(groups, map[string]any{"scope": "account", "groupName": fmt.Sprintf("bench-other-%d", k), "access": access})
			continue
		}
		tenants = append(tenants, map[string]any{"embedTenantName": fmt.Sprintf("bench-tenant-%04d", 1+k%(embedReadTenants-1)), "access": access})
	}
	return tenants, groups
}

// embedReadChain makes a chain of depth folders with the measured workbook in the
// deepest and n grants on it (the deciding one on the topmost folder), and returns the
// dashboard's public id.
func (s *embedReadStack) chain(ctx context.Context, key string, depth, n int) (string, error) {
	var folders []int64
	parent := int64(0)
	for level := 1; level <= depth; level++ {
		id, err := s.api.createFolder(ctx, s.bearer, s.dep, fmt.Sprintf("bench %s level %d", key, level), parent)
		if err != nil {
			return "", err
		}
		folders, parent = append(folders, id), id
	}
	wb, publicID, err := s.publish(ctx, parent, "bench "+key)
	if err != nil {
		return "", err
	}
	// Objects from the workbook up; the fillers spread over them, the deciding entry last
	// on the topmost folder.
	objects := []string{fmt.Sprintf("/workbooks/%d", wb)}
	for i := len(folders) - 1; i >= 0; i-- {
		objects = append(objects, fmt.Sprintf("/folders/%d", folders[i]))
	}
	spare := n - 1
	offset := 0
	for i, obj := range objects {
		share := spare / (len(objects) - i)
		spare -= share
		tenants, groups := fillers(share, offset)
		offset += share
		if i == len(objects)-1 {
			tenants = append(tenants, map[string]any{"embedTenantName": embedReadTenant, "access": "read"})
		}
		g := map[string]any{}
		if tenants != nil {
			g["tenants"] = tenants
		}
		if groups != nil {
			g["groups"] = groups
		}
		if len(g) == 0 {
			continue
		}
		if err := s.grant(ctx, obj, g); err != nil {
			return "", err
		}
	}
	return publicID, nil
}

func setupEmbedRead(depth, grants int) func(ctx context.Context, env *Env) (*Target, error) {
	return func(ctx context.Context, env *Env) (*Target, error) {
		s, err := env.embedReadStack(ctx)
		if err != nil {
			return nil, err
		}
		key := fmt.Sprintf("d%dg%d", depth, grants)
		publicID, err := s.chain(ctx, key, depth, grants)
		if err != nil {
			return nil, err
		}
		token, err := s.viewer(ctx, key)
		if err != nil {
			return nil, err
		}
		path := "/api/v1/embed/dashboards/" + publicID
		if err := s.count(ctx, key, path, token); err != nil {
			return nil, err
		}
		t := &Target{Proc: s.p.All, RSS: s.p.Procs, Workers: embedReadWorkers,
			Targeter: vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodGet, URL: s.p.Gateway + path,
				Header: http.Header{"Authorization": {"Bearer " + token}}})}
		return t, nil
	}
}

// setupEmbedList is a page of the viewer's listing, for the d8g200 viewer (who may open
// the dashboards of its tenant: the measured ones and a neighbour).
func setupEmbedList(ctx context.Context, env *Env) (*Target, error) {
	s, err := env.embedReadStack(ctx)
	if err != nil {
		return nil, err
	}
	token, err := s.viewer(ctx, "list")
	if err != nil {
		return nil, err
	}
	path := "/api/v1/embed/dashboards?first=20"
	if err := s.count(ctx, "list", path, token); err != nil {
		return nil, err
	}
	return &Target{Proc: s.p.All, RSS: s.p.Procs, Workers: embedReadWorkers,
		Targeter: vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodGet, URL: s.p.Gateway + path,
			Header: http.Header{"Authorization": {"Bearer " + token}}})}, nil
}

// embedReadCount is what one request of a row cost, over embedReadCounted serial ones.
type embedReadCount struct {
	commands, documents, redis  float64
	examined                    bool
	statements, admitted, scans float64
	heaviest                    string
	byCommand                   string  // statements per request by "command db.collection"
	readPath                    float64 // statements per request of the read path's own reads
}

// embedReadPath reports whether an examined "command db.collection" is one of the read
// path's own: the workbook, its folders and the root's grants (workspace-svc) and the
// viewer's groups (embed-svc). The rest in a counted window is the platform's
// background (the gateway's credential refreshes, the audit outboxes' polls), which
// follows the window's length, not the request.
func embedReadPath(k string) bool {
	return (strings.HasPrefix(k, "find workspace.") || k == "find embed.external_users") && !strings.Contains(k, "outbox")
}

// embedReadBudget is the read path's own commands per request, however deep the
// workbook and however many grants its chain holds: the workbook by {dep, publicId}, its
// folder, the folder's ancestors (one read, from depth 2 on), the root's grants and the
// viewer's groups.
const embedReadBudget = 5

var embedReadCounts = struct {
	sync.Mutex
	byKey map[string]embedReadCount
	setup string
}{byKey: map[string]embedReadCount{}}

const embedReadCounted = 20

// count sends embedReadCounted serial GETs of path and records the commands of the
// platform, the Redis commands and the proxy's examination per request.
func (s *embedReadStack) count(ctx context.Context, key, path, token string) error {
	opt, err := redis.ParseURL(s.p.Redis)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	c := newAPIClient(s.p.Gateway)
	defer c.http.CloseIdleConnections()
	// One unmeasured request: connections and caches warm.
	if err := c.do(ctx, http.MethodGet, path, "Bearer "+token, nil, http.StatusOK, nil); err != nil {
		return err
	}
	ex0, exErr := s.examined(ctx, true)
	examining := true
	defer func() {
		if examining {
			_, _ = s.examined(context.WithoutCancel(ctx), false)
		}
	}()
	m0, d0, err := platformMongoCounts(ctx, s.p)
	if err != nil {
		return err
	}
	r0, err := redisCommands(ctx, rdb)
	if err != nil {
		return err
	}
	for range embedReadCounted {
		if err := c.do(ctx, http.MethodGet, path, "Bearer "+token, nil, http.StatusOK, nil); err != nil {
			return err
		}
	}
	m1, d1, err := platformMongoCounts(ctx, s.p)
	if err != nil {
		return err
	}
	r1, err := redisCommands(ctx, rdb)
	if err != nil {
		return err
	}
	ex1, exErr1 := s.examined(ctx, false)
	examining = exErr1 != nil
	n := float64(embedReadCounted)
	ec := embedReadCount{commands: (m1 - m0) / n, documents: (d1 - d0) / n, redis: float64(r1-r0-1) / n}
	if exErr == nil && exErr1 == nil {
		ec.examined = true
		var most int64
		var by []string
		for k, a := range ex1 {
			b := ex0[k]
			if d := a.Statements - b.Statements; d > 0 {
				by = append(by, fmt.Sprintf("%s %.2f", k, float64(d)/n))
				if embedReadPath(k) {
					ec.readPath += float64(d) / n
				}
			}
			ec.statements += float64(a.Statements-b.Statements) / n
			ec.admitted += float64(a.Documents-b.Documents) / n
			ec.scans += float64(a.Scans-b.Scans) / n
			if d := a.Documents - b.Documents; d > most {
				most, ec.heaviest = d, fmt.Sprintf("%s %.1f", k, float64(d)/n)
			}
		}
		slices.Sort(by)
		ec.byCommand = strings.Join(by, ", ")
	} else {
		logf("embed-read %s: no examination: %v", key, errors.Join(exErr, exErr1))
	}
	embedReadCounts.Lock()
	embedReadCounts.byKey[key] = ec
	embedReadCounts.setup = s.setup
	embedReadCounts.Unlock()
	return nil
}

// examined is sizedStack.examined for this table's stack.
func (s *embedReadStack) examined(ctx context.Context, record bool) (map[string]examinedTotals, error) {
	var out struct {
		Commands map[string]examinedTotals `bson:"commands"`
	}
	err := s.client.Database("admin").RunCommand(ctx, bson.D{{Key: wireproxy.ExamineCommand, Value: 1}, {Key: "record", Value: record}}).Decode(&out)
	return out.Commands, err
}

func embedReadNotes(res map[string]*Summary) []string {
	embedReadCounts.Lock()
	defer embedReadCounts.Unlock()
	var lines []string
	if embedReadCounts.setup != "" {
		lines = append(lines, "set-up: "+embedReadCounts.setup)
	}
	keys := []string{"d1g1", "d1g200", "d8g1", "d8g200", "list"}
	for _, k := range keys {
		c, ok := embedReadCounts.byKey[k]
		if !ok {
			continue
		}
		name := k
		if s := res[k]; s != nil {
			name = s.Name
		}
		line := fmt.Sprintf("%-26s %.2f MongoDB commands, %.2f documents returned, %.2f Redis commands per request", name+":", c.commands, c.documents, c.redis)
		if c.examined {
			line += fmt.Sprintf("; examined: %.2f statements, %.2f documents admitted, %.2f scans (heaviest %s)", c.statements, c.admitted, c.scans, c.heaviest)
		}
		lines = append(lines, line)
		if c.byCommand != "" {
			lines = append(lines, fmt.Sprintf("%-26s statements by command: %s", "", c.byCommand))
		}
	}
	// The verdict is on the read path's own commands: 1 and 200 grants alike at each
	// depth, and within the budget at both depths.
	var problems []string
	for _, k := range keys[:4] {
		c, ok := embedReadCounts.byKey[k]
		if !ok || !c.examined {
			problems = append(problems, k+" not examined")
			continue
		}
		if c.readPath > embedReadBudget+0.01 {
			problems = append(problems, fmt.Sprintf("%s %.2f > %d", k, c.readPath, embedReadBudget))
		}
	}
	for _, pair := range [][2]string{{"d1g200", "d1g1"}, {"d8g200", "d8g1"}} {
		a, okA := embedReadCounts.byKey[pair[0]]
		b, okB := embedReadCounts.byKey[pair[1]]
		if okA && okB && math.Abs(a.readPath-b.readPath) > 0.01 {
			problems = append(problems, fmt.Sprintf("%s %.2f vs %s %.2f", pair[0], a.readPath, pair[1], b.readPath))
		}
	}
	var got []string
	for _, k := range keys[:4] {
		if c, ok := embedReadCounts.byKey[k]; ok {
			got = append(got, fmt.Sprintf("%s %.2f", k, c.readPath))
		}
	}
	verdict := fmt.Sprintf("bounded: the same at 1 and 200 grants, at most %d at depth 1 and 8", embedReadBudget)
	if len(problems) > 0 {
		verdict = "NOT bounded: " + strings.Join(problems, "; ")
	}
	lines = append(lines, fmt.Sprintf("the read path's own commands per request (%s): %s", strings.Join(got, ", "), verdict))
	return lines
}
