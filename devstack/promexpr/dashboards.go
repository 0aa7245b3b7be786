package promexpr

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Dashboard is one Grafana dashboard JSON file, as far as the checks read it.
type Dashboard struct {
	File   string
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []Panel `json:"panels"`
}

// Panel is one panel (rows are panels too, without targets).
type Panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *Datasource `json:"datasource"`
	Targets    []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *Datasource `json:"datasource"`
	} `json:"targets"`
	Panels []Panel `json:"panels"` // a collapsed row's panels
}

// Datasource is a panel's or target's datasource reference.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Query is one target of one panel.
type Query struct {
	Dashboard, Panel, RefID, Expr string
	Datasource                    *Datasource
}

// LoadDashboards reads every *.json of dir.
func LoadDashboards(dir string) ([]Dashboard, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no dashboards in %s (%v)", dir, err)
	}
	sort.Strings(files)
	var out []Dashboard
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var d Dashboard
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		d.File = f
		out = append(out, d)
	}
	return out, nil
}

// Queries are every target of every panel of d, a collapsed row's included.
func (d Dashboard) Queries() []Query {
	var out []Query
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				ds := t.Datasource
				if ds == nil {
					ds = p.Datasource
				}
				out = append(out, Query{Dashboard: d.UID, Panel: p.Title, RefID: t.RefID, Expr: t.Expr, Datasource: ds})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}
