package deploytest_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// usersJSStub runs deploy/mongodb/users.js as mongosh would, against a stand-in for
// mongosh's db whose admin database records every call: the users and roles named in
// EXISTING (JSON) are there already, as on a second run.
const usersJSStub = `
const fs = require('fs'), vm = require('vm');
const existing = JSON.parse(process.env.EXISTING);
const calls = [];
const admin = {
  getUser: (n) => existing.includes('user:' + n) ? { user: n } : null,
  getRole: (n) => existing.includes('role:' + n) ? { role: n } : null,
  createUser: (u) => calls.push({ op: 'createUser', name: u.user, doc: u }),
  updateUser: (n, u) => calls.push({ op: 'updateUser', name: n, doc: u }),
  createRole: (r) => calls.push({ op: 'createRole', name: r.role, doc: r }),
  updateRole: (n, r) => calls.push({ op: 'updateRole', name: n, doc: r }),
  dropRole: (n) => calls.push({ op: 'dropRole', name: n }),
  dropUser: (n) => calls.push({ op: 'dropUser', name: n }),
};
const db = { getSiblingDB: (name) => { if (name !== 'admin') throw new Error('users.js uses database ' + name); return admin; } };
const file = process.env.USERS_JS;
vm.runInNewContext(fs.readFileSync(file, 'utf8'), { db, process: { env: process.env } }, { filename: file });
process.stdout.write(JSON.stringify(calls));
`

type roleRef struct {
	Role string `json:"role"`
	DB   string `json:"db"`
}

type privilege struct {
	Resource struct {
		DB         *string `json:"db,omitempty"`
		Collection *string `json:"collection,omitempty"`
		Cluster    bool    `json:"cluster,omitempty"`
	} `json:"resource"`
	Actions []string `json:"actions"`
}

type usersJSCall struct {
	Op   string `json:"op"`
	Name string `json:"name"`
	Doc  struct {
		Pwd        string      `json:"pwd"`
		Roles      []roleRef   `json:"roles"`
		Privileges []privilege `json:"privileges"`
	} `json:"doc"`
}

// runUsersJS runs users.js with existing users and roles ("user:NAME", "role:NAME").
func runUsersJS(t *testing.T, env map[string]string, existing ...string) []usersJSCall {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is needed to run deploy/mongodb/users.js (see README: the tests need Node)")
	}
	ex, _ := json.Marshal(append([]string{}, existing...))
	cmd := exec.Command("node", "-e", usersJSStub)
	cmd.Env = append(os.Environ(), "EXISTING="+string(ex), "USERS_JS="+filepath.Join(repoRoot(t), "deploy", "mongodb", "users.js"))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("run users.js: %v\n%s", err, stderr)
	}
	var calls []usersJSCall
	if err := json.Unmarshal(out, &calls); err != nil {
		t.Fatalf("users.js calls %s: %v", out, err)
	}
	return calls
}

// composeMongoUsers is, for each MongoDB user a compose service connects as (its
// MONGODB_URI), the databases those services use: MONGODB_DATABASE and, for embed-svc,
// the audit trail's AUDIT_MONGODB_DATABASE.
func composeMongoUsers(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for name, svc := range loadCompose(t).Services {
		uri, ok := svc.Environment["MONGODB_URI"]
		if !ok {
			continue
		}
		u, err := url.Parse(resolve(uri))
		if err != nil || u.User == nil || u.User.Username() == "" {
			t.Fatalf("compose service %s: MONGODB_URI %q names no user", name, uri)
		}
		user := u.User.Username()
		for _, v := range []string{"MONGODB_DATABASE", "AUDIT_MONGODB_DATABASE"} {
			if db := svc.Environment[v]; db != "" && !slices.Contains(out[user], db) {
				out[user] = append(out[user], db)
			}
		}
	}
	for _, dbs := range out {
		slices.Sort(dbs)
	}
	return out
}

// auditCollection is auditstore.Collection, read from its source (the package is
// internal to embed-svc).
func auditCollection(t *testing.T) string {
	t.Helper()
	path := filepath.Join(repoRoot(t), "embed-svc", "internal", "store", "auditstore", "mongo.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if n.Name == "Collection" && i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						return v
					}
				}
			}
		}
	}
	t.Fatalf("%s: no const Collection", path)
	return ""
}

// deploy/mongodb/users.js, run as mongosh runs it (on an empty database and again over
// its own result): every process's user holds readWrite on exactly the databases its
// services use (docker-compose.yml) and no other built-in role; embed-svc's user holds a
// custom role, created before the users and brought up to date on a second run, that
// grants collMod on the audit events' collection (what embed-svc runs when
// AUDIT_RETENTION changes), and custom roles grant nothing beyond the user's own
// databases' collections.
func TestMongoDBUsersHoldTheirOwnDatabasesAndAuditRetention(t *testing.T) {
	env := map[string]string{}
	for _, v := range []string{"GATEWAY_PW", "WORKSPACE_PW", "EMBED_PW", "DBTSYNC_PW"} {
		env[v] = "pw-" + v
	}
	want := composeMongoUsers(t)
	if len(want) < 4 {
		t.Fatalf("compose connects as %v, want the 4 process users", want)
	}
	embedUser, auditDB := "", loadCompose(t).Services["embed-svc"].Environment["AUDIT_MONGODB_DATABASE"]
	if u, err := url.Parse(resolve(loadCompose(t).Services["embed-svc"].Environment["MONGODB_URI"])); err == nil && u.User != nil {
		embedUser = u.User.Username()
	}
	if embedUser == "" || auditDB == "" {
		t.Fatalf("compose's embed-svc: user %q, audit database %q", embedUser, auditDB)
	}
	coll := auditCollection(t)

	first := runUsersJS(t, env)
	var names []string
	for _, c := range first {
		if c.Op == "createUser" {
			names = append(names, "user:"+c.Name)
		}
		if c.Op == "createRole" {
			names = append(names, "role:"+c.Name)
		}
	}
	second := runUsersJS(t, env, names...)

	for run, calls := range map[string][]usersJSCall{"first run": first, "second run": second} {
		users := map[string][]roleRef{}
		roles := map[string][]privilege{}
		for i, c := range calls {
			switch c.Op {
			case "createUser", "updateUser":
				if c.Doc.Pwd == "" || !strings.HasPrefix(c.Doc.Pwd, "pw-") {
					t.Errorf("%s: %s %s with password %q, want one from the environment", run, c.Op, c.Name, c.Doc.Pwd)
				}
				users[c.Name] = c.Doc.Roles
				// A role a user holds is made before the user.
				for _, r := range c.Doc.Roles {
					if r.DB == "admin" && !slices.ContainsFunc(calls[:i], func(p usersJSCall) bool {
						return (p.Op == "createRole" || p.Op == "updateRole") && p.Name == r.Role
					}) {
						t.Errorf("%s: %s holds role %s, not made before it", run, c.Name, r.Role)
					}
				}
			case "createRole", "updateRole":
				if len(c.Doc.Roles) != 0 {
					t.Errorf("%s: role %s inherits %v, want nothing", run, c.Name, c.Doc.Roles)
				}
				roles[c.Name] = c.Doc.Privileges
			}
			if run == "second run" && (c.Op == "createUser" || c.Op == "createRole") {
				t.Errorf("second run: %s %s, want an update of what is there", c.Op, c.Name)
			}
		}
		if len(users) != len(want) {
			t.Errorf("%s: users %v, want those compose connects as, %v", run, mapsKeys(users), mapsKeys(want))
		}
		for user, dbs := range want {
			held, ok := users[user]
			if !ok {
				t.Errorf("%s: no user %s", run, user)
				continue
			}
			var rw []string
			collMod := false
			for _, r := range held {
				switch {
				case r.Role == "readWrite":
					rw = append(rw, r.DB)
				case r.DB == "admin" && roles[r.Role] != nil:
					for _, p := range roles[r.Role] {
						db, c := p.Resource.DB, p.Resource.Collection
						if p.Resource.Cluster || db == nil || c == nil || *c == "" || !slices.Contains(dbs, *db) {
							res, _ := json.Marshal(p.Resource)
							t.Errorf("%s: %s's role %s grants %v on %s, beyond its own databases' collections", run, user, r.Role, p.Actions, res)
							continue
						}
						if *db == auditDB && *c == coll && slices.Contains(p.Actions, "collMod") {
							collMod = true
						}
					}
				default:
					t.Errorf("%s: %s holds %s on %s, want only readWrite and the file's own roles", run, user, r.Role, r.DB)
				}
			}
			slices.Sort(rw)
			if !slices.Equal(rw, dbs) {
				t.Errorf("%s: %s has readWrite on %v, want exactly %v", run, user, rw, dbs)
			}
			if user == embedUser && !collMod {
				t.Errorf("%s: %s cannot run collMod on %s.%s: a changed AUDIT_RETENTION stops embed-svc at start", run, user, auditDB, coll)
			}
			if user != embedUser && collMod {
				t.Errorf("%s: %s may change the audit trail's retention", run, user)
			}
		}
	}
}
