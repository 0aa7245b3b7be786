package workspace

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// An import reads its body once, as a stream (json.Decoder, token by token): the format
// first, then the items one at a time, each checked on its own (type, key grammar, name,
// the sizes the single routes allow) and written to a spool file, keeping only what
// references need (each key's type, a folder's parent and depth, the report keys
// dashboards name). When the whole body has passed, the references are checked
// (dangling, cycles, order, depth), and only then is the plan made and applied, reading
// the items back from the spool. A bad bundle is refused before anything is written.

// bundleFolder is what the check keeps of a bundle folder.
type bundleFolder struct {
	index  int
	parent *string
	depth  int // 1 at the bundle's top level; 0 until its parent is known
}

// parsedImport is a body that passed every check: the request's fields, and the items
// in a spool file (the caller closes it: close removes it).
type parsedImport struct {
	DryRun   bool
	FolderID int64
	Source   *BundleSource
	Root     *embedaccess.Grants
	Items    int
	Depth    int // the deepest folder level of the bundle (0: no folder)
	spool    *os.File
}

// Close removes the spool.
func (pi *parsedImport) Close() {
	if pi != nil && pi.spool != nil {
		name := pi.spool.Name()
		_ = pi.spool.Close()
		_ = os.Remove(name)
	}
}

// each reads the spooled items back in bundle order.
func (pi *parsedImport) each(fn func(i int, it *BundleItem) error) error {
	if _, err := pi.spool.Seek(0, io.SeekStart); err != nil {
		return err
	}
	dec := json.NewDecoder(bufio.NewReaderSize(pi.spool, 64<<10))
	for i := 0; ; i++ {
		var it BundleItem
		if err := dec.Decode(&it); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if err := fn(i, &it); err != nil {
			return err
		}
	}
}

// bodyReader counts what the decoder reads: past limit, the body is refused; past
// window bytes since mark (the start of an item), the item is.
type bodyReader struct {
	r            io.Reader
	n, limit     int64
	mark, window int64
	errBody      error
	errItem      error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.n > b.limit {
		return 0, b.errBody
	}
	if b.window > 0 && b.n-b.mark > b.window {
		return 0, b.errItem
	}
	if room := b.limit + 1 - b.n; int64(len(p)) > room {
		p = p[:room]
	}
	k, err := b.r.Read(p)
	b.n += int64(k)
	return k, err
}

// bundleCheck is the state of the first pass over an import body.
type bundleCheck struct {
	s       *service
	dec     *json.Decoder
	body    *bodyReader
	out     *bufio.Writer
	enc     *json.Encoder
	pi      *parsedImport
	folders map[string]*bundleFolder
	reports map[string]int
	books   map[string]int
	// reportRefs: each report key a dashboard names, and the first item naming it.
	reportRefs map[string]int
	// folderRefs: each folder key a report or workbook sits in, and the first such item.
	folderRefs map[string]int
	itemBytes  int64
}

// maxBundleItemBytes bounds one bundle item as sent: what the single routes let its parts
// hold, its name, and its grants.
func (s *service) maxBundleItemBytes() int64 {
	l := s.limits
	return int64(4*MaxNameLength+l.MetaBytes+l.CalculatedFieldsBytes+l.DraftBytes+l.PublishedBytes+64*l.Grants+512*l.EmbedAccessEntries) + 64<<10
}

// checkImport reads and checks a whole import body, spooling its items; any error is the
// request's (4xx, nothing written).
func (s *service) checkImport(body io.Reader) (*parsedImport, error) {
	f, err := os.CreateTemp("", "workspace-import-*.jsonl")
	if err != nil {
		return nil, fmt.Errorf("import spool: %w", err)
	}
	pi := &parsedImport{spool: f}
	c := &bundleCheck{s: s, pi: pi, out: bufio.NewWriterSize(f, 64<<10), folders: map[string]*bundleFolder{}, reports: map[string]int{},
		books: map[string]int{}, reportRefs: map[string]int{}, folderRefs: map[string]int{}, itemBytes: s.maxBundleItemBytes()}
	c.enc = json.NewEncoder(c.out)
	c.body = &bodyReader{r: body, limit: s.limits.ImportBytes,
		errBody: errs.New(errs.TooLarge, "the import body is larger than the limit of %d bytes", s.limits.ImportBytes)}
	c.dec = json.NewDecoder(c.body)
	c.dec.DisallowUnknownFields()
	if err := c.envelope(); err != nil {
		pi.Close()
		return nil, err
	}
	if err := c.out.Flush(); err != nil {
		pi.Close()
		return nil, fmt.Errorf("import spool: %w", err)
	}
	return pi, nil
}

// jsonErr is a decoding error as the client's: where, and what.
func (c *bundleCheck) jsonErr(where string, err error) error {
	var e *errs.Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errs.Invalidf("%s: malformed JSON: unexpected end of input", where)
	}
	if h, ok := errs.As(httpx.JSONError(err)); ok {
		if h.Kind == errs.TooLarge {
			return h
		}
		return errs.Invalidf("%s: %s", where, h.Message)
	}
	return errs.Invalidf("%s: %s", where, err.Error())
}

func (c *bundleCheck) delim(where string, want json.Delim) error {
	tok, err := c.dec.Token()
	if err != nil {
		return c.jsonErr(where, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		kind := "an object"
		if want == '[' {
			kind = "an array"
		}
		return errs.Invalidf("%s must be %s", where, kind)
	}
	return nil
}

func (c *bundleCheck) key(where string) (string, error) {
	tok, err := c.dec.Token()
	if err != nil {
		return "", c.jsonErr(where, err)
	}
	k, _ := tok.(string)
	return k, nil
}

func (c *bundleCheck) envelope() error {
	if err := c.delim("the request body", '{'); err != nil {
		return err
	}
	seenBundle := false
	for c.dec.More() {
		k, err := c.key("the request body")
		if err != nil {
			return err
		}
		switch k {
		case "bundle":
			if err := c.bundle(); err != nil {
				return err
			}
			seenBundle = true
		case "dryRun":
			var v *bool
			if err := c.dec.Decode(&v); err != nil {
				return c.jsonErr("dryRun", err)
			}
			c.pi.DryRun = v != nil && *v
		case "folderId":
			var v *int64
			if err := c.dec.Decode(&v); err != nil {
				return c.jsonErr("folderId", err)
			}
			if v != nil {
				if *v <= 0 {
					return errs.Invalidf("folderId must be a positive integer, or null for the workspace root")
				}
				c.pi.FolderID = *v
			}
		default:
			return errs.Invalidf("unknown field %q: an import takes bundle, dryRun and folderId", k)
		}
	}
	if _, err := c.dec.Token(); err != nil {
		return c.jsonErr("the request body", err)
	}
	if _, err := c.dec.Token(); err != io.EOF {
		return errs.Invalidf("request body must be a single JSON object")
	}
	if c.body.n > c.body.limit {
		return c.body.errBody
	}
	if !seenBundle {
		return errs.Invalidf("bundle is required: what GET .../workspace/export answered")
	}
	return c.references()
}

func formatError(format string, args ...any) error {
	return errs.New(errs.Invalid, format, args...).WithCode(errs.CodeBundleFormat)
}

func (c *bundleCheck) bundle() error {
	if err := c.delim("bundle", '{'); err != nil {
		return err
	}
	k, err := c.key("bundle")
	if err != nil {
		return err
	}
	if k != "format" {
		return formatError("the bundle must begin with its format (%q), which is read before anything else", BundleFormat)
	}
	var format string
	if err := c.dec.Decode(&format); err != nil {
		return formatError("bundle.format must be a string, %q", BundleFormat)
	}
	if format != BundleFormat {
		return formatError("bundle format %q is not supported: this service reads %q", format, BundleFormat)
	}
	seenItems := false
	for c.dec.More() {
		k, err := c.key("bundle")
		if err != nil {
			return err
		}
		switch k {
		case "source":
			var src BundleSource
			if err := c.dec.Decode(&src); err != nil {
				return c.jsonErr("bundle.source", err)
			}
			c.pi.Source = &src
		case "rootEmbedAccess":
			var g *embedaccess.Grants
			if err := c.dec.Decode(&g); err != nil {
				return c.jsonErr("bundle.rootEmbedAccess", err)
			}
			if g != nil {
				if err := embedaccess.Validate(*g, c.s.limits.EmbedAccessEntries); err != nil {
					return errs.Invalidf("bundle.rootEmbedAccess: %s", errMessage(err))
				}
				cg := canonicalGrants(*g)
				c.pi.Root = &cg
			}
		case "items":
			if err := c.items(); err != nil {
				return err
			}
			seenItems = true
		default:
			return errs.Invalidf("unknown field bundle.%s", k)
		}
	}
	if _, err := c.dec.Token(); err != nil {
		return c.jsonErr("bundle", err)
	}
	if !seenItems {
		return errs.Invalidf("bundle.items is required (an array, which may be empty)")
	}
	return nil
}

func (c *bundleCheck) items() error {
	if err := c.delim("bundle.items", '['); err != nil {
		return err
	}
	for i := 0; c.dec.More(); i++ {
		if i >= c.s.limits.ImportItems {
			return errs.New(errs.TooLarge, "the bundle holds more than %d items, the limit of one import; import it in parts, a folder at a time", c.s.limits.ImportItems)
		}
		c.body.mark, c.body.window = c.body.n, c.itemBytes
		c.body.errItem = errs.New(errs.TooLarge, "bundle.items[%d] is larger than %d bytes, the most one item may hold (its meta, calculated fields, dashboards and grants at their limits)", i, c.itemBytes)
		var it BundleItem
		err := c.dec.Decode(&it)
		c.body.window = 0
		if err != nil {
			return c.jsonErr(fmt.Sprintf("bundle.items[%d]", i), err)
		}
		if err := c.item(i, &it); err != nil {
			return err
		}
		if err := c.enc.Encode(&it); err != nil {
			return fmt.Errorf("import spool: %w", err)
		}
		c.pi.Items++
	}
	_, err := c.dec.Token()
	if err != nil {
		return c.jsonErr("bundle.items", err)
	}
	return nil
}

// errMessage is an error's client-facing message.
func errMessage(err error) string {
	if e, ok := errs.As(err); ok {
		return e.Message
	}
	return err.Error()
}

func itemErr(i int, it *BundleItem, format string, args ...any) error {
	return errs.New(errs.Invalid, "bundle.items[%d] (%s %q): %s", i, it.Type, it.Key, fmt.Sprintf(format, args...)).WithCode(errs.CodeBundleInvalid)
}

// item checks one bundle item on its own, as the single routes check what they store,
// and records its key and references.
func (c *bundleCheck) item(i int, it *BundleItem) error {
	if !it.Type.Valid() {
		return errs.New(errs.Invalid, "bundle.items[%d].type must be one of FOLDER, WORKBOOK, REPORT, not %q", i, it.Type).WithCode(errs.CodeBundleInvalid)
	}
	if err := ValidKey(it.Key); err != nil {
		return itemErr(i, it, "key: %s", errMessage(err))
	}
	var seen bool
	switch it.Type {
	case TypeFolder:
		_, seen = c.folders[it.Key]
	case TypeReport:
		_, seen = c.reports[it.Key]
	default:
		_, seen = c.books[it.Key]
	}
	if seen {
		return itemErr(i, it, "the key is listed twice: keys are unique per type")
	}
	name, err := validName("name", it.Name)
	if err != nil {
		return itemErr(i, it, "%s", errMessage(err))
	}
	it.Name = name
	if it.FolderKey != nil {
		if err := ValidKey(*it.FolderKey); err != nil {
			return itemErr(i, it, "folderKey: %s", errMessage(err))
		}
	}
	if it.Type == TypeFolder {
		if it.Meta != nil || it.CalculatedFields != nil || it.DashboardDraft != nil || it.DashboardPublished != nil {
			return itemErr(i, it, "a folder has no meta, calculatedFields or dashboards")
		}
	} else {
		if it.Grants != nil {
			return itemErr(i, it, "only folders have grants")
		}
		for _, p := range []struct {
			field string
			raw   *json.RawMessage
		}{{"meta", &it.Meta}, {"calculatedFields", &it.CalculatedFields}} {
			v, err := jsonObject(p.field, *p.raw)
			if err != nil {
				return itemErr(i, it, "%s", errMessage(err))
			}
			*p.raw = v
		}
	}
	if it.Type == TypeReport && (it.DashboardDraft != nil || it.DashboardPublished != nil || it.EmbedAccess != nil) {
		return itemErr(i, it, "a report has no dashboards or embed access")
	}
	if it.Grants != nil {
		if err := c.checkGrants(*it.Grants); err != nil {
			return itemErr(i, it, "%s", errMessage(err))
		}
		g := sortedGrants(*it.Grants)
		it.Grants = &g
	}
	if it.EmbedAccess != nil {
		if err := embedaccess.Validate(*it.EmbedAccess, c.s.limits.EmbedAccessEntries); err != nil {
			return itemErr(i, it, "embedAccess: %s", errMessage(err))
		}
		g := canonicalGrants(*it.EmbedAccess)
		it.EmbedAccess = &g
	}
	if err := c.s.checkSizes(it.Meta, it.CalculatedFields, nil); err != nil {
		return errs.New(errs.TooLarge, "bundle.items[%d] (%s %q): %s", i, it.Type, it.Key, errMessage(err))
	}
	if it.Type == TypeWorkbook {
		if err := c.dashboards(i, it); err != nil {
			return err
		}
	}
	switch it.Type {
	case TypeFolder:
		c.folders[it.Key] = &bundleFolder{index: i, parent: it.FolderKey}
	case TypeReport:
		c.reports[it.Key] = i
	default:
		c.books[it.Key] = i
	}
	if it.Type != TypeFolder && it.FolderKey != nil {
		if _, ok := c.folderRefs[*it.FolderKey]; !ok {
			c.folderRefs[*it.FolderKey] = i
		}
	}
	return nil
}

func (c *bundleCheck) checkGrants(grants []Grant) error {
	if len(grants) > c.s.limits.Grants {
		return errs.Invalidf("a folder holds at most %d grants, not %d", c.s.limits.Grants, len(grants))
	}
	seen := map[int64]bool{}
	for j, g := range grants {
		if g.UserID <= 0 {
			return errs.Invalidf("grants[%d].userId must be a positive integer", j)
		}
		if _, ok := ParseLevel(g.Level); !ok {
			return errs.Invalidf("grants[%d].level must be one of view, edit, manage, not %q", j, g.Level)
		}
		if seen[g.UserID] {
			return errs.Invalidf("grants[%d].userId %d is listed twice", j, g.UserID)
		}
		seen[g.UserID] = true
	}
	return nil
}
