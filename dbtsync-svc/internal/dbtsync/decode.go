package dbtsync

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/libs/httpx"
)

// startSyncRequest is the decoded body of POST .../dbt-sync, without the manifest, which
// was streamed out while decoding.
type startSyncRequest struct {
	Source        string
	Ref           *string
	BranchName    *string
	Output        string
	HasManifest   bool
	SchemaVersion int
}

// shaRE matches refs that could be commit SHAs; StartSync asks the repository whether
// such a ref is a branch or tag before accepting it.
var shaRE = regexp.MustCompile(`^[0-9a-fA-F]{7,40}$`)

func badRequest(format string, args ...any) error {
	return httpx.Errorf(http.StatusBadRequest, format, args...)
}

// decodeStartSyncRequest reads the body as a token stream: the small fields are decoded,
// and the `manifest` value is copied token by token to manifest (the object store) as it
// arrives, so the API never holds an upload in memory. The manifest's schema version is
// checked on the way: an unsupported one stops the upload at once.
func decodeStartSyncRequest(body io.Reader, manifest io.Writer) (startSyncRequest, error) {
	req := startSyncRequest{Source: "git", Output: "branch"}
	// A manifest is ignored with source "git" (the spec): once "source" has said so, the
	// manifest is skipped unread; when it comes first, it is streamed, and its checks
	// (manifestErr) count only if "source" turns out to be "manifest".
	sourceSeen := false
	var manifestErr error
	// Duplicate names are allowed: rejecting them makes the decoder remember every member
	// name of every open object, which a body of millions of short keys turns into
	// hundreds of MiB (security review #8). The worker decodes the manifest again anyway.
	dec := jsontext.NewDecoder(body, jsontext.AllowDuplicateNames(true))
	tok, err := dec.ReadToken()
	if err != nil {
		return req, syntaxError(err)
	}
	if tok.Kind() != '{' {
		return req, badRequest("request body must be a JSON object")
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return req, syntaxError(err)
		}
		key := tok.String()
		switch key {
		case "source", "ref", "branchName", "output":
			tok, err := dec.ReadToken()
			if err != nil {
				return req, syntaxError(err)
			}
			if tok.Kind() == 'n' && (key == "ref" || key == "branchName") {
				continue
			}
			if tok.Kind() != '"' {
				if tok.Kind() == '{' || tok.Kind() == '[' {
					return req, badRequest("field %q must be a string, not %s", key, kindName(tok.Kind()))
				}
				return req, badRequest("field %q must be a string, not %s", key, kindName(tok.Kind()))
			}
			v := tok.String()
			switch key {
			case "source":
				if v != "git" && v != "manifest" {
					return req, badRequest("field \"source\" must be \"git\" or \"manifest\", not %q", v)
				}
				req.Source, sourceSeen = v, true
			case "output":
				if v != "branch" && v != "files" {
					return req, badRequest("field \"output\" must be \"branch\" or \"files\", not %q", v)
				}
				req.Output = v
			case "ref":
				req.Ref = &v
			case "branchName":
				req.BranchName = &v
			}
		case "manifest":
			if sourceSeen && req.Source == "git" {
				if err := dec.SkipValue(); err != nil {
					return req, syntaxError(err)
				}
				continue
			}
			switch dec.PeekKind() {
			case 'n':
				_, _ = dec.ReadToken()
				continue
			case '{':
			case 0:
				return req, syntaxError(io.ErrUnexpectedEOF)
			default:
				manifestErr = badRequest("field \"manifest\" must be an object, not %s", kindName(dec.PeekKind()))
				if err := dec.SkipValue(); err != nil {
					return req, syntaxError(err)
				}
				continue
			}
			v, err := copyManifest(dec, manifest, sourceSeen)
			var checkErr manifestCheckError
			switch {
			case errors.As(err, &checkErr):
				manifestErr = checkErr.error
			case err != nil:
				return req, err
			}
			req.HasManifest, req.SchemaVersion = true, v
		default:
			return req, badRequest("unknown field %q", key)
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return req, syntaxError(err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			return req, badRequest("request body must be a single JSON object")
		}
		return req, syntaxError(err)
	}
	if req.Source == "git" {
		req.HasManifest, req.SchemaVersion, manifestErr = false, 0, nil
	}
	if manifestErr != nil {
		return req, manifestErr
	}
	switch {
	case req.Source == "manifest" && !req.HasManifest:
		return req, badRequest("field \"manifest\" is required when \"source\" is \"manifest\"")
	case req.Ref != nil && *req.Ref == "":
		return req, badRequest("field \"ref\" must not be empty")
	case req.Ref != nil && !validRef(*req.Ref):
		return req, badRequest("field \"ref\" is not a valid git branch or tag name")
	case req.BranchName != nil && !validBranchName(*req.BranchName):
		return req, badRequest("field \"branchName\" must be 1 to 200 characters of letters, digits, '-', '_', '.', '/', with no '..' and no leading or trailing '/'")
	}
	if req.Source == "manifest" && req.HasManifest && req.SchemaVersion == 0 {
		return req, badRequest("field \"manifest\" has no metadata.dbt_schema_version: a dbt manifest (schema v7 to v12, or v20) is required")
	}
	return req, nil
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
		return httpx.Errorf(http.StatusRequestEntityTooLarge, "request body is larger than %d bytes", mb.Limit)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return badRequest("malformed JSON: unexpected end of input")
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		if errors.Is(err, jsontext.ErrDuplicateName) {
			return badRequest("malformed JSON: duplicate field at %s", se.JSONPointer)
		}
		return badRequest("malformed JSON at byte %d: %v", se.ByteOffset, se.Err)
	}
	return badRequest("malformed JSON: %v", err)
}

// manifestCheckError is a manifest that is well-formed JSON but fails a check (its
// schema version): with the source not yet known, the stream goes on and the error
// counts only for source "manifest".
type manifestCheckError struct{ error }

// copyManifest streams the manifest object from dec to w and returns its schema version
// (0 when it has none). With stopOnCheck, a failed check stops the stream at once (the
// source is known to be "manifest"); otherwise it is returned as manifestCheckError
// once the whole value is copied.
func copyManifest(dec *jsontext.Decoder, w io.Writer, stopOnCheck bool) (int, error) {
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
		} else if len(stack) > 0 && kind != '}' && kind != ']' {
			top := &stack[len(stack)-1]
			// A string value at manifest.metadata.dbt_schema_version is the version.
			if kind == '"' && len(stack) == 2 && stack[0].key == "metadata" && top.key == "dbt_schema_version" {
				v, err := convert.CheckSchemaVersion(tok.String())
				switch {
				case err != nil && stopOnCheck:
					return 0, badRequest("field \"manifest\": %v", err)
				case err != nil:
					checkErr = manifestCheckError{badRequest("field \"manifest\": %v", err)}
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
			return 0, badRequest("malformed manifest: %v", err)
		}
		switch kind {
		case '{':
			stack = append(stack, frame{object: true, wantKey: true})
		case '[':
			stack = append(stack, frame{})
		case '}', ']':
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

var (
	refRE    = regexp.MustCompile(`^[A-Za-z0-9._/+-]{1,200}$`)
	branchRE = regexp.MustCompile(`^[A-Za-z0-9._/-]{1,200}$`)
	sanRE    = regexp.MustCompile(`[^A-Za-z0-9._/-]+`)
)

func validRef(s string) bool {
	return refRE.MatchString(s) && !regexp.MustCompile(`\.\.|//|^/|/$|\.lock$|^-`).MatchString(s)
}

func validBranchName(s string) bool {
	return branchRE.MatchString(s) && !regexp.MustCompile(`\.\.|//|^/|/$`).MatchString(s)
}

// derivedBranchName is dbt/<ref>, sanitized to the branch name alphabet.
func derivedBranchName(ref string) string {
	s := sanRE.ReplaceAllString(ref, "-")
	s = regexp.MustCompile(`\.\.+`).ReplaceAllString(s, ".")
	s = regexp.MustCompile(`/+`).ReplaceAllString(s, "/")
	s = regexp.MustCompile(`^[/.-]+|[/.-]+$`).ReplaceAllString(s, "")
	if s == "" {
		s = "ref"
	}
	if len(s) > 190 {
		s = s[:190]
	}
	return "dbt/" + s
}
