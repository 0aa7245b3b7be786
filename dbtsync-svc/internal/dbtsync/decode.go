package dbtsync

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/libs/errs"
)

// decodeStartSyncRequest reads the body of POST .../dbt-sync as a token stream: the small
// fields are decoded, and the `manifest` value is copied token by token to manifest (the
// manifest store) as it arrives, so the API never holds an upload in memory. The
// manifest's schema version is checked on the way: an unsupported one stops the upload
// at once. It only parses: StartSync applies the rules. On an error the fields decoded
// so far are returned too (the audit trail names them).
func decodeStartSyncRequest(body io.Reader, manifest io.Writer, limits convert.ManifestLimits) (StartSyncInput, error) {
	// The body is read as the worker reads the manifest: a duplicate member name or
	// invalid UTF-8 anywhere is refused. The names of the open objects are remembered by
	// the worker's own check (convert.Names, a fraction of what jsontext's takes), at most
	// limits.MaxNames of them, the worker's limit (the worker's other limit, of a value
	// read whole, is its read's to apply: only the conversion knows which it reads).
	limits = limits.WithDefaults()
	d := &startSyncDecoder{dec: jsontext.NewDecoder(body, jsontext.AllowDuplicateNames(true)), manifest: manifest,
		fields: convert.NewNames(0), names: convert.NewNames(limits.MaxNames), in: StartSyncInput{Source: SourceGit, Output: OutputBranch}}
	if err := d.object(); err != nil {
		return d.in, err
	}
	if d.in.Source == SourceGit {
		d.in.HasManifest, d.in.SchemaVersion, d.manifestErr = false, 0, nil
	}
	return d.in, d.manifestErr
}

// startSyncDecoder is the state of one start-sync body being read.
type startSyncDecoder struct {
	dec      *jsontext.Decoder
	fields   *convert.Names // the body's own member names
	names    *convert.Names // the manifest's
	manifest io.Writer
	in       StartSyncInput
	// A manifest is ignored with source "git" (the spec): once "source" has said so, the
	// manifest is skipped unread; when it comes first, it is streamed, and its checks
	// (manifestErr) count only if "source" turns out to be "manifest".
	sourceSeen  bool
	manifestErr error
}

// object reads the body: one JSON object and nothing after it.
func (d *startSyncDecoder) object() error {
	tok, err := d.dec.ReadToken()
	if err != nil {
		return syntaxError(err)
	}
	if tok.Kind() != '{' {
		return errs.Invalidf("request body must be a JSON object")
	}
	d.fields.Open()
	for d.dec.PeekKind() != '}' {
		tok, err := d.dec.ReadToken()
		if err != nil {
			return syntaxError(err)
		}
		key := tok.String()
		if err := d.addName(d.fields, key); err != nil {
			return err
		}
		if err := d.member(key); err != nil {
			return err
		}
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return syntaxError(err)
	}
	if _, err := d.dec.ReadToken(); err != io.EOF {
		if err == nil {
			return errs.Invalidf("request body must be a single JSON object")
		}
		return syntaxError(err)
	}
	return nil
}

// member reads the value of the body's member key.
func (d *startSyncDecoder) member(key string) error {
	switch key {
	case "source", "ref", "branchName", "output":
		return d.stringMember(key)
	case "manifest":
		return d.manifestMember()
	case "select", "exclude":
		return d.selectorMember(key)
	}
	return errs.Invalidf("unknown field %q", key)
}

// stringMember reads one of the string fields; ref and branchName may be null.
func (d *startSyncDecoder) stringMember(key string) error {
	tok, err := d.dec.ReadToken()
	if err != nil {
		return syntaxError(err)
	}
	if tok.Kind() == 'n' && (key == "ref" || key == "branchName") {
		return nil
	}
	if tok.Kind() != '"' {
		return errs.Invalidf("field %q must be a string, not %s", key, kindName(tok.Kind()))
	}
	v := tok.String()
	switch key {
	case "source":
		if v != SourceGit && v != SourceManifest {
			return errs.Invalidf("field \"source\" must be \"git\" or \"manifest\", not %q", v)
		}
		d.in.Source, d.sourceSeen = v, true
	case "output":
		if v != OutputBranch && v != OutputFiles {
			return errs.Invalidf("field \"output\" must be \"branch\" or \"files\", not %q", v)
		}
		d.in.Output = v
	case "ref":
		d.in.Ref = &v
	case "branchName":
		d.in.BranchName = &v
	}
	return nil
}

// addName records the member name just read in its object, refusing a duplicate (the
// decoder's pointer names it) and one past the limit of names.
func (d *startSyncDecoder) addName(names *convert.Names, name string) error {
	err := names.Add([]byte(name))
	var limit *convert.ManifestLimitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &limit):
		return errs.TooLargef("field \"manifest\" is over its limit of %d member names in the objects open at once", limit.Value)
	}
	return errs.Invalidf("malformed JSON: duplicate member name %q in %s", name, where(d.dec.StackPointer().Parent()))
}

// manifestMember streams the manifest out, or skips it when source "git" came first.
func (d *startSyncDecoder) manifestMember() error {
	if d.sourceSeen && d.in.Source == SourceGit {
		if err := d.dec.SkipValue(); err != nil {
			return syntaxError(err)
		}
		return nil
	}
	switch d.dec.PeekKind() {
	case 'n':
		_, _ = d.dec.ReadToken()
		return nil
	case '{':
	case 0:
		return syntaxError(io.ErrUnexpectedEOF)
	default:
		d.manifestErr = errs.Invalidf("field \"manifest\" must be an object, not %s", kindName(d.dec.PeekKind()))
		if err := d.dec.SkipValue(); err != nil {
			return syntaxError(err)
		}
		return nil
	}
	v, err := d.copyManifest(d.sourceSeen)
	var checkErr manifestCheckError
	switch {
	case errors.As(err, &checkErr):
		d.manifestErr = checkErr.error
	case err != nil:
		return err
	}
	d.in.HasManifest, d.in.SchemaVersion = true, v
	return nil
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "a JSON value"
}

func syntaxError(err error) error {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return errs.TooLargef("request body is larger than %d bytes", mb.Limit)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errs.Invalidf("malformed JSON: unexpected end of input")
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		switch { // jsontext exports no error for these two
		case se.Err != nil && strings.HasPrefix(se.Err.Error(), "invalid UTF-8"):
			return errs.Invalidf("malformed JSON: invalid UTF-8 in a string at %s (byte %d)", where(se.JSONPointer), se.ByteOffset)
		case se.Err != nil && strings.HasPrefix(se.Err.Error(), "invalid surrogate pair"):
			return errs.Invalidf("malformed JSON: invalid UTF-16 surrogate pair in a string at %s (byte %d)", where(se.JSONPointer), se.ByteOffset)
		}
		return errs.Invalidf("malformed JSON at byte %d: %v", se.ByteOffset, se.Err)
	}
	return errs.Invalidf("malformed JSON: %v", err)
}

// where is a JSON pointer as a message says it ("/" for the body itself).
func where(p jsontext.Pointer) string {
	if p == "" {
		return "/"
	}
	return string(p)
}

// manifestCheckError is a manifest that is well-formed JSON but fails a check (its
// schema version): with the source not yet known, the stream goes on and the error
// counts only for source "manifest".
type manifestCheckError struct{ error }

// copyManifest streams the manifest object from the decoder to d.manifest and returns its schema version
// (0 when it has none). With stopOnCheck, a failed check stops the stream at once (the
// source is known to be "manifest"); otherwise it is returned as manifestCheckError
// once the whole value is copied.
func (d *startSyncDecoder) copyManifest(stopOnCheck bool) (int, error) {
	dec, w := d.dec, d.manifest
	var checkErr error
	enc := jsontext.NewEncoder(w, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	type frame struct {
		object  bool
		wantKey bool
		key     string
	}
	var stack []frame
	version := 0
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return 0, syntaxError(err)
		}
		kind := tok.Kind()
		isKey := len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].wantKey && kind == '"'
		if isKey {
			stack[len(stack)-1].key = tok.String()
			stack[len(stack)-1].wantKey = false
			if err := d.addName(d.names, stack[len(stack)-1].key); err != nil {
				return 0, err
			}
		} else if len(stack) > 0 && kind != '}' && kind != ']' {
			top := &stack[len(stack)-1]
			// A string value at manifest.metadata.dbt_schema_version is the version.
			if kind == '"' && len(stack) == 2 && stack[0].key == "metadata" && top.key == "dbt_schema_version" {
				v, err := convert.CheckSchemaVersion(tok.String())
				switch {
				case err != nil && stopOnCheck:
					return 0, errs.Invalidf("field \"manifest\": %v", err)
				case err != nil:
					checkErr = manifestCheckError{errs.Invalidf("field \"manifest\": %v", err)}
				default:
					version = v
				}
			}
			if top.object {
				top.wantKey = true
			}
		}
		if err := enc.WriteToken(tok); err != nil {
			if errors.Is(err, io.ErrClosedPipe) || !isSyntactic(err) {
				return 0, fmt.Errorf("stream manifest: %w", err)
			}
			return 0, errs.Invalidf("malformed manifest: %v", err)
		}
		switch kind {
		case '{':
			stack = append(stack, frame{object: true, wantKey: true})
			d.names.Open()
		case '[':
			stack = append(stack, frame{})
		case '}', ']':
			if kind == '}' {
				d.names.Close()
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				if checkErr != nil {
					return 0, checkErr
				}
				return version, nil
			}
			if top := &stack[len(stack)-1]; top.object {
				top.wantKey = true
			}
		}
	}
}

func isSyntactic(err error) bool {
	var se *jsontext.SyntacticError
	return errors.As(err, &se)
}

// selectorMember reads select or exclude: a string, or null (no selector for this sync).
func (d *startSyncDecoder) selectorMember(key string) error {
	tok, err := d.dec.ReadToken()
	if err != nil {
		return syntaxError(err)
	}
	f := SelectorField{Set: true}
	switch tok.Kind() {
	case 'n':
	case '"':
		v := tok.String()
		f.Value = &v
	default:
		return errs.Invalidf("field %q must be a string or null, not %s", key, kindName(tok.Kind()))
	}
	if key == "select" {
		d.in.Select = f
	} else {
		d.in.Exclude = f
	}
	return nil
}
