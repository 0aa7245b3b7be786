// Command transferbench measures the workspace's export and import of one deployment in
// process, over the in-memory store (so the figures are the service's own work: bundle
// encoding and decoding, checks, planning; not a database's): it seeds a deployment of
// -items items, then times one phase and samples the heap while it runs. make bench runs
// it as a child per round (devstack/cmd/bench, the transfer table) and reads the JSON line
// it prints:
//
//	transferbench -items 10000 -phase export|import
//
// peakHeapBytes is the most the live heap grew above what it held before the phase (the
// seeded store and, for import, nothing else): what the phase itself kept.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
	"github.com/analyticsco/platform/workspace-svc/internal/store/memstore"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

type result struct {
	Phase          string  `json:"phase"`
	Items          int     `json:"items"`
	Seconds        float64 `json:"seconds"`
	ItemsPerSecond float64 `json:"itemsPerSecond"`
	BundleBytes    int64   `json:"bundleBytes"`
	PeakHeapBytes  uint64  `json:"peakHeapBytes"`
	Changed        int     `json:"changed"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "transferbench:", err)
		os.Exit(1)
	}
}

var admin = &identity.Principal{Credential: identity.CredentialBearer, Account: identity.Account{ID: 1},
	User: &identity.User{ID: 1, Email: "admin@example.com", Role: identity.RoleAdmin}}

func run() error {
	items := flag.Int("items", 10_000, "items the deployment holds (folders, reports and workbooks)")
	phase := flag.String("phase", "export", "export or import")
	cpuProfile := flag.String("cpuprofile", "", "write the phase's CPU profile to this file")
	flag.Parse()
	ctx := context.Background()
	svc := workspace.NewService(workspace.Ports{Store: &indexedStore{Store: memstore.New(), ids: map[storeKey]int64{}}}, workspace.Options{Limits: workspace.Limits{ImportItems: *items, ExportItems: *items, ImportBytes: 1 << 30, ExportBytes: 1 << 30}})
	const src, dst = 1, 2
	if err := seed(ctx, svc, src, *items); err != nil {
		return err
	}
	f, err := os.CreateTemp("", "transferbench-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	res := result{Phase: *phase, Items: *items}
	if *cpuProfile != "" {
		pf, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		profile = pf
	}
	var elapsed time.Duration
	switch *phase {
	case "export":
		elapsed, res.PeakHeapBytes, err = measure(func() error {
			_, err := svc.Export(ctx, admin, src, 0, f)
			return err
		})
	case "import":
		if _, err := svc.Export(ctx, admin, src, 0, f); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		body := io.MultiReader(stringReader(`{"dryRun":false,"bundle":`), f, stringReader(`}`))
		var out workspace.ImportResult
		elapsed, res.PeakHeapBytes, err = measure(func() error {
			var err error
			out, err = svc.Import(ctx, admin, dst, workspace.ImportInput{Body: body})
			return err
		})
		c := out.Counts()
		res.Changed = c[workspace.ImportCreate] + c[workspace.ImportUpdate]
		if c[workspace.ImportConflict] > 0 {
			return fmt.Errorf("import: %d conflicts", c[workspace.ImportConflict])
		}
	default:
		return fmt.Errorf("-phase must be export or import, not %q", *phase)
	}
	if err != nil {
		return err
	}
	if st, err := f.Stat(); err == nil {
		res.BundleBytes = st.Size()
	}
	res.Seconds = elapsed.Seconds()
	res.ItemsPerSecond = float64(*items) / elapsed.Seconds()
	return json.NewEncoder(os.Stdout).Encode(res)
}

// indexedStore is the in-memory store with an index of keys for ItemsByKey, which the
// store itself answers by scanning every item: without it the bench would mostly measure
// that scan, as no database does (MongoDB serves it from the key index).
type indexedStore struct {
	*memstore.Store
	mu  sync.Mutex
	ids map[storeKey]int64
}

type storeKey struct {
	deploymentID int64
	typ          workspace.ItemType
	key          string
}

func (s *indexedStore) note(it *workspace.Item) {
	if it != nil && it.Key != "" {
		s.mu.Lock()
		s.ids[storeKey{it.DeploymentID, it.Type, it.Key}] = it.ID
		s.mu.Unlock()
	}
}

func (s *indexedStore) InsertItem(ctx context.Context, it *workspace.Item) error {
	err := s.Store.InsertItem(ctx, it)
	if err == nil {
		s.note(it)
	}
	return err
}

func (s *indexedStore) ApplyTreeOp(ctx context.Context, deploymentID, v int64, op *workspace.TreeOp) error {
	err := s.Store.ApplyTreeOp(ctx, deploymentID, v, op)
	if err == nil && op != nil && op.Created != nil {
		s.note(op.Created)
	}
	return err
}

func (s *indexedStore) ItemsByKey(ctx context.Context, deploymentID int64, typ workspace.ItemType, keys []string, parts workspace.Parts) (map[string]*workspace.Item, error) {
	s.mu.Lock()
	ids := make([]int64, 0, len(keys))
	for _, k := range keys {
		if id, ok := s.ids[storeKey{deploymentID, typ, k}]; ok {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	got, err := s.Store.Items(ctx, deploymentID, ids, parts)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*workspace.Item, len(got))
	for _, it := range got {
		if it.Type == typ && it.Key != "" {
			out[it.Key] = it
		}
	}
	return out, nil
}

type strReader struct{ s string }

func stringReader(s string) io.Reader { return &strReader{s} }

func (r *strReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := copy(p, r.s)
	r.s = r.s[n:]
	return n, nil
}

// profile, when set, receives the phase's CPU profile.
var profile io.Writer

// measure runs f, sampling the live heap every 10 ms, and answers its wall time
// and the most the heap grew above where it was before f.
func measure(f func() error) (time.Duration, uint64, error) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				peak = max(peak, read())
			}
		}
	}()
	if profile != nil {
		_ = pprof.StartCPUProfile(profile)
	}
	start := time.Now()
	err := f()
	elapsed := time.Since(start)
	if profile != nil {
		pprof.StopCPUProfile()
	}
	close(done)
	wg.Wait()
	peak = max(peak, read())
	if peak < base {
		return elapsed, 0, err
	}
	return elapsed, peak - base, err
}

// seed fills deploymentID with n items: folders two levels deep with grants and embed grants, a
// third of the rest reports, the others workbooks whose drafts name two reports, one in
// five of them published.
func seed(ctx context.Context, svc workspace.Service, deploymentID int64, n int) error {
	tenant := embedaccess.Grants{Tenants: []embedaccess.TenantEntry{{EmbedTenantName: "acme-corp", Access: embedaccess.Read}}}
	var folders []int64
	for len(folders) < max(n/50, 1) {
		top, err := svc.CreateFolder(ctx, admin, deploymentID, workspace.CreateFolderInput{Name: fmt.Sprint("team ", len(folders))})
		if err != nil {
			return err
		}
		folders = append(folders, top.ID)
		if _, err := svc.SetPermissions(ctx, admin, deploymentID, top.ID, []workspace.Grant{{UserID: 2, Level: "edit"}}); err != nil {
			return err
		}
		if _, err := svc.PutEmbedAccess(ctx, admin, deploymentID, workspace.EmbedObject{Type: workspace.TypeFolder, ID: top.ID}, tenant); err != nil {
			return err
		}
		for j := 0; j < 4; j++ {
			sub, err := svc.CreateFolder(ctx, admin, deploymentID, workspace.CreateFolderInput{Name: fmt.Sprint("area ", j), ParentID: top.ID})
			if err != nil {
				return err
			}
			folders = append(folders, sub.ID)
		}
	}
	var reports []int64
	for i := 0; len(folders)+len(reports) < n/3; i++ {
		meta := json.RawMessage(fmt.Sprintf(`{"sql":"select measure_%d from orders group by region","chart":{"type":"bar","stacked":false}}`, i))
		r, err := svc.CreateItem(ctx, admin, deploymentID, workspace.TypeReport, workspace.CreateItemInput{Name: fmt.Sprint("report ", i), FolderID: folders[i%len(folders)], Meta: meta})
		if err != nil {
			return err
		}
		reports = append(reports, r.ID)
	}
	for i := 0; len(folders)+len(reports)+i < n; i++ {
		w, err := svc.CreateItem(ctx, admin, deploymentID, workspace.TypeWorkbook, workspace.CreateItemInput{Name: fmt.Sprint("board ", i), FolderID: folders[(i*7)%len(folders)],
			Meta: json.RawMessage(`{"theme":"dark"}`), DashboardDraft: draft(reports[i%len(reports)], reports[(i*3)%len(reports)])})
		if err != nil {
			return err
		}
		if i%5 == 0 {
			if _, err := svc.Publish(ctx, admin, deploymentID, w.ID, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

func draft(reports ...int64) *workspace.DashboardConfig {
	cfg := &workspace.DashboardConfig{}
	for i, id := range reports {
		wid, typ, x, w := fmt.Sprint("w", i), "CHART", int64(i*6), int64(6)
		cfg.Widgets = append(cfg.Widgets, workspace.DashboardWidget{ID: &wid, Type: &typ,
			Position: &workspace.WidgetPosition{X: &x, Y: &x, W: &w, H: &w}, Config: map[string]any{"reportId": float64(id)}})
	}
	return cfg
}
