// Package httpx holds the HTTP plumbing every service shares: the router, route
// registration (Handle), strict JSON request decoding, JSON responses and pagination.
// The error type, its codes and the one error encoder are errs's.
package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/analyticsco/platform/libs/errs"
)

// WriteJSON writes v as JSON with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // an API answer, not HTML: "<token>" stays readable
	_ = enc.Encode(v)
}

// NoContent is the response of an endpoint answered 204 No Content (EncodeResponse).
type NoContent struct{}

// EncodeResponse is the response encoder of a route (HandleOptions.Encode): NoContent is
// answered 204 with no body, anything else 200 with its JSON (WriteJSON). A service with
// other answers (202, headers) handles those and hands the rest to it.
func EncodeResponse(_ context.Context, w http.ResponseWriter, resp any) error {
	if _, ok := resp.(NoContent); ok {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	WriteJSON(w, http.StatusOK, resp)
	return nil
}

// WriteError writes the JSON error body with the code of its status.
func WriteError(w http.ResponseWriter, status int, message string) {
	WriteCodedError(w, status, "", message)
}

// WriteCodedError writes the JSON error body with a specific code ("": the code of the
// status).
func WriteCodedError(w http.ResponseWriter, status int, code, message string) {
	errs.WriteBody(w, status, code, message)
}

// Internal logs err with its request id and answers a 500 that reveals nothing else.
func Internal(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	errs.Internal(r.Context(), w, logger, err, "method", r.Method, "path", r.URL.Path)
}

// DecodeJSON decodes the request body into dst strictly: the content type must be
// JSON (415), unknown fields, wrong types, malformed JSON and trailing data are 400 with
// a message naming the field, and a body over the limit set by http.MaxBytesReader is 413.
func DecodeJSON(r *http.Request, dst any) error {
	if err := RequireJSON(r); err != nil {
		return err
	}
	return DecodeJSONBody(r.Body, dst)
}

// RequireJSON answers 415 unless the request says its body is JSON.
func RequireJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return errs.Statusf(http.StatusUnsupportedMediaType, "Content-Type must be application/json")
	}
	return nil
}

// DecodeJSONBody is DecodeJSON without the content-type check.
func DecodeJSONBody(body io.Reader, dst any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return JSONError(err)
	}
	if dec.More() {
		return errs.Invalidf("request body must be a single JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errs.Invalidf("request body must be a single JSON object")
	}
	return nil
}

// JSONError turns an encoding/json error into a client error naming the field.
func JSONError(err error) error {
	var (
		syntax  *json.SyntaxError
		typ     *json.UnmarshalTypeError
		maxSize *http.MaxBytesError
		client  *errs.Error
	)
	switch {
	case errors.As(err, &client):
		return client
	case errors.As(err, &maxSize):
		return errs.TooLargef("request body is larger than %d bytes", maxSize.Limit)
	case errors.Is(err, io.EOF):
		return errs.Invalidf("request body is empty: a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errs.Invalidf("malformed JSON: unexpected end of input")
	case errors.As(err, &syntax):
		return errs.Invalidf("malformed JSON at byte %d: %s", syntax.Offset, syntax.Error())
	case errors.As(err, &typ):
		if typ.Field == "" {
			return errs.Invalidf("request body must be %s, not %s", jsonKind(typ.Type), typ.Value)
		}
		return errs.Invalidf("field %q must be %s, not %s", typ.Field, jsonKind(typ.Type), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errs.Invalidf("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return errs.Invalidf("malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}
