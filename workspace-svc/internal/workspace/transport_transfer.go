package workspace

import (
	"context"
	"io"
	"math"
	"net/http"
	"strconv"

	"github.com/go-kit/kit/endpoint"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/httpx"
)

// TransferEndpoints are the endpoints of export and import.
type TransferEndpoints struct {
	Export, Import endpoint.Endpoint
}

type (
	exportRequest struct {
		scope
		Folder int64
	}
	importRequest struct {
		scope
		Body io.Reader
	}
	// exportStream is an export's answer: the service writes the bundle to the response
	// as it reads it (encodeExport).
	exportStream struct {
		s Service
		exportRequest
	}
)

func makeTransferEndpoints(s Service) TransferEndpoints {
	return TransferEndpoints{
		Export: func(_ context.Context, req any) (any, error) {
			return exportStream{s: s, exportRequest: req.(exportRequest)}, nil
		},
		Import: func(ctx context.Context, req any) (any, error) {
			r := req.(importRequest)
			return s.Import(ctx, r.P, r.DeploymentID, ImportInput{Body: r.Body})
		},
	}
}

// registerTransfer routes export and import. The import body is bounded by the service's
// own limit (WORKSPACE_IMPORT_MAX_BYTES), which it reads as a stream, not by MaxBodyBytes;
// an import counts in fair's ClassImport.
func registerTransfer(r *httpx.Router, e Endpoints, o httpx.HandleOptions, fair *fairshare.Limiter) {
	ex := o
	ex.Encode = encodeExport
	httpx.Handle(r, "GET", base+"/workspace/export", e.Export, decodeExportRequest, ex)
	im := o.WithMaxBody(math.MaxInt64).WithAdmit(fair.Guard(ClassImport))
	im.Encode = encodeImport
	httpx.Handle(r, "POST", base+"/workspace/import", e.Import, decodeImportRequest, im)
}

func decodeExportRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	req := exportRequest{scope: sc}
	if raw := r.URL.Query().Get("folderId"); raw != "" {
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || id <= 0 {
			return nil, errs.Invalidf("folderId must be a positive integer, not %q; omit it to export the whole deployment", raw)
		}
		req.Folder = id
	}
	return req, nil
}

func decodeImportRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	if err := httpx.RequireJSON(r); err != nil {
		return nil, err
	}
	return importRequest{scope: sc, Body: r.Body}, nil
}

// startWriter sends the status and headers with the first byte of the bundle, so an
// export refused before it writes anything is answered by the error encoder.
type startWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *startWriter) Write(b []byte) (int, error) {
	if !s.started {
		s.started = true
		s.w.Header().Set("Content-Type", "application/json")
		s.w.WriteHeader(http.StatusOK)
	}
	return s.w.Write(b)
}

// encodeExport runs the export into the response. A failure once the bundle has begun
// cannot change the status: the connection is aborted, so the client sees a broken
// transfer rather than a bundle that merely looks short.
func encodeExport(ctx context.Context, w http.ResponseWriter, resp any) error {
	st := resp.(exportStream)
	sw := &startWriter{w: w}
	if _, err := st.s.Export(ctx, st.P, st.DeploymentID, st.Folder, sw); err != nil {
		if !sw.started {
			return err
		}
		panic(http.ErrAbortHandler)
	}
	return nil
}

type importEntryBody struct {
	Type   ItemType   `json:"type"`
	Key    *string    `json:"key"`
	Action string     `json:"action"`
	ID     *int64     `json:"id,omitempty"`
	Error  *errs.Body `json:"error,omitempty"`
}

type importResultBody struct {
	DryRun        bool              `json:"dryRun"`
	GrantsDropped bool              `json:"grantsDropped"`
	Counts        map[string]int    `json:"counts"`
	Items         []importEntryBody `json:"items"`
}

// encodeImport answers an import's plan or outcome, each conflict with the status, code
// and message its own request would have been answered with.
func encodeImport(ctx context.Context, w http.ResponseWriter, resp any) error {
	res, ok := resp.(ImportResult)
	if !ok {
		return encodeResponse(ctx, w, resp)
	}
	return httpx.EncodeResponse(ctx, w, importBody(res))
}

func importBody(res ImportResult) importResultBody {
	out := importResultBody{DryRun: res.DryRun, GrantsDropped: res.GrantsDropped, Counts: res.Counts(), Items: make([]importEntryBody, len(res.Items))}
	for i, e := range res.Items {
		b := importEntryBody{Type: e.Type, Action: e.Action}
		if e.Key != "" {
			k := e.Key
			b.Key = &k
		}
		if e.ID != 0 {
			id := e.ID
			b.ID = &id
		}
		if e.Err != nil {
			body := errs.BodyOf(e.Err)
			b.Error = &body
		}
		out.Items[i] = b
	}
	return out
}
