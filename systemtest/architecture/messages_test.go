package architecture_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/systemtest/internal/envdoc"
)

// logCalls are the logger methods: what they are given goes to the operator's log,
// where naming a setting is what helps.
var logCalls = map[string]bool{
	"Debug": true, "DebugContext": true, "Info": true, "InfoContext": true, "Warn": true, "WarnContext": true,
	"Error": true, "ErrorContext": true, "Log": true, "LogAttrs": true,
}

// operatorOnly are the settings named in messages only an operator reads, by the file
// that names them: errors at start-up (a process refusing its configuration) and errors
// a client is shown only as internal_error.
var operatorOnly = map[string][]string{
	"gateway/internal/gateway/clientaddr.go":     {"GATEWAY_BEHIND_PROXY", "GATEWAY_TRUSTED_PROXIES"}, // start-up check of the proxy settings
	"gateway/internal/platformctl/audit.go":      {"NATS_URL"},                                        // the platformctl CLI
	"embed-svc/internal/keys/keys.go":            {"EMBED_KEY_ENCRYPTION_KEY"},                        // loading the signing keys at start-up
	"dbtsync-svc/internal/credentials/sealer.go": {"DBT_CREDENTIALS_KEY"},                             // parsing the key list at start-up
	"dbtsync-svc/internal/gitsource/source.go":   {"DBT_CREDENTIALS_KEY"},                             // not a job failure: the tenant reads internal_error
	"libs/server/connect.go":                     {"NATS_URL"},                                        // connecting at start-up
	"libs/redisx/client.go":                      {"REDIS_URL", "REDIS_MODE"},                         // building the client at start-up
	"libs/redisx/durable.go":                     {"REDIS_DURABLE_REPLICAS", "REDIS_DURABLE_TIMEOUT", "REDIS_URL"},
}

// settingsInMessages lists the string literals passed to a call other than a logger's
// that name one of settings ("line: NAME"), but for the names allowed.
func settingsInMessages(fset *token.FileSet, name string, src any, settings *regexp.Regexp, allowed []string) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, err
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && logCalls[sel.Sel.Name] {
			return false
		}
		for _, arg := range call.Args {
			for _, lit := range literals(arg) {
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					continue
				}
				for _, m := range settings.FindAllString(s, -1) {
					if !slices.Contains(allowed, m) {
						found = append(found, fset.Position(lit.Pos()).String()+": "+m)
					}
				}
			}
		}
		return true
	})
	return found, nil
}

// literals are the string literals an argument is made of: itself, or the parts of a
// concatenation.
func literals(e ast.Expr) []*ast.BasicLit {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			return []*ast.BasicLit{e}
		}
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			return append(literals(e.X), literals(e.Y)...)
		}
	case *ast.ParenExpr:
		return literals(e.X)
	}
	return nil
}

// settingsPattern matches any of the platform's environment variables as a word.
func settingsPattern(t *testing.T) *regexp.Regexp {
	var names []string
	for _, p := range envdoc.Processes() {
		for _, v := range p.Vars {
			names = append(names, regexp.QuoteMeta(v.Name))
		}
	}
	if len(names) < 50 {
		t.Fatalf("only %d settings found", len(names))
	}
	slices.Sort(names)
	return regexp.MustCompile(`\b(` + strings.Join(slices.Compact(names), "|") + `)\b`)
}

// TestClientMessagesNameNoSetting: the services' error messages (an HTTP error's, a
// job's failure) name a limit and its value, never the operator's environment variable
// behind it; that goes to the log, and the configuration reference maps one to the
// other. Start-up code (cmd/, config/) and the logger's calls are the operator's; the
// few other messages only an operator reads are listed in operatorOnly.
func TestClientMessagesNameNoSetting(t *testing.T) {
	settings := settingsPattern(t)
	root := devstack.RepoRoot(t)
	fset := token.NewFileSet()
	files := 0
	for _, mod := range []string{"gateway", "workspace-svc", "embed-svc", "dbtsync-svc", "libs"} {
		dir := filepath.Join(root, mod)
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if name := d.Name(); path != dir && (strings.HasPrefix(name, ".") || name == "testdata" || name == "cmd" || name == "config") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			files++
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			found, err := settingsInMessages(fset, path, src, settings, operatorOnly[filepath.ToSlash(rel)])
			for _, f := range found {
				t.Errorf("%s: a message names the setting; name the limit and its value (log the setting, or list an operator-only message in operatorOnly)", f)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 100 {
		t.Fatalf("checked %d Go files; the walk missed the modules", files)
	}
}

// The check finds a setting in a message, in a concatenation and in a job failure, and
// not in a log line, a comment, a struct tag or a name it only contains.
func TestASettingInAMessageIsFound(t *testing.T) {
	src := `package p
type C struct {
	Max int ` + "`" + `env:"DBT_SYNC_MAX_FILES"` + "`" + `
}
// over DBT_SYNC_MAX_FILES the job fails
func f() {
	_ = errs.Invalidf("over the limit of %d (DBT_SYNC_MAX_FILES)", n)
	_ = dbtsync.Failure(code, "too many files: " + "DBT_SYNC_MAX_FILES")
	logger.WarnContext(ctx, "over DBT_SYNC_MAX_FILES", "n", n)
	_ = errs.Invalidf("over the limit of %d (XDBT_SYNC_MAX_FILESX)", n)
	_ = errs.Invalidf("a folder holds at most %d grants", n)
}`
	settings := regexp.MustCompile(`\b(DBT_SYNC_MAX_FILES)\b`)
	got, err := settingsInMessages(token.NewFileSet(), "p.go", src, settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"p.go:7:20: DBT_SYNC_MAX_FILES", "p.go:8:49: DBT_SYNC_MAX_FILES"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got, _ := settingsInMessages(token.NewFileSet(), "p.go", src, settings, []string{"DBT_SYNC_MAX_FILES"}); len(got) != 0 {
		t.Fatalf("an allowed setting was reported: %v", got)
	}
	// Every process's settings are looked for.
	all := settingsPattern(t)
	for _, name := range []string{"GATEWAY_TRUSTED_PROXIES", "WORKSPACE_MAX_FAVORITES", "EMBED_MAX_TENANTS_PER_ACCOUNT", "DBT_SYNC_MAX_QUEUED_JOBS", "AUDIT_ACCOUNT_MAX_EVENTS", "NATS_URL"} {
		if !all.MatchString("the limit (" + name + ")") {
			t.Errorf("%s is not among the settings looked for", name)
		}
	}
}
