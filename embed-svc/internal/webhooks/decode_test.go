package webhooks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
)

// decodeAll runs every decoder over one request whose body, query and path values come
// from the fuzzer, and fails on a panic or an error that is not a 4xx answer.
func decodeAll(t *testing.T, body, query, id, deliveryID string) {
	decoders := map[string]func(context.Context, *http.Request) (any, error){
		"create": decodeCreate, "update": decodeUpdate, "list": decodeList, "id": decodeID, "deliveries": decodeDeliveries, "redeliver": decodeRedeliver,
	}
	for name, dec := range decoders {
		r := httptest.NewRequest(http.MethodPost, "/api/v1/webhooks", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.URL.RawQuery = query
		r.SetPathValue("id", id)
		r.SetPathValue("deliveryId", deliveryID)
		req, err := dec(context.Background(), r)
		if err != nil {
			status, _, _, ok := errs.Answer(err)
			if !ok || status < 400 || status >= 500 {
				t.Fatalf("%s: %v is answered %d (body %q, query %q)", name, err, status, body, query)
			}
			continue
		}
		switch v := req.(type) {
		case createRequest:
			if v.In.URL == "" || len(v.In.URL) > MaxURLBytes || len(v.In.Events) == 0 || len(v.In.Events) > MaxEvents || len(v.In.Description) > MaxDescriptionBytes {
				t.Fatalf("create accepted %+v", v.In)
			}
			for _, p := range v.In.Events {
				if !ValidPattern(p) {
					t.Fatalf("create accepted the pattern %q", p)
				}
			}
			if v.In.DeploymentIDs != nil && (len(v.In.DeploymentIDs) == 0 || len(v.In.DeploymentIDs) > MaxDeploymentIDs) {
				t.Fatalf("create accepted deploymentIds %v", v.In.DeploymentIDs)
			}
		case updateRequest:
			if !validID("wh_", v.ID) {
				t.Fatalf("update accepted the id %q", v.ID)
			}
			if v.Patch.DeploymentIDs != nil && *v.Patch.DeploymentIDs != nil {
				for _, d := range *v.Patch.DeploymentIDs {
					if d <= 0 {
						t.Fatalf("update accepted the deployment %d", d)
					}
				}
			}
		case deliveriesRequest:
			switch v.Q.Status {
			case "", StatusPending, StatusSucceeded, StatusFailed:
			default:
				t.Fatalf("deliveries accepted the status %q", v.Q.Status)
			}
		case redeliverRequest:
			if !validID("dlv_", v.DeliveryID) {
				t.Fatalf("redeliver accepted the id %q", v.DeliveryID)
			}
		}
	}
}

func FuzzDecoders(f *testing.F) {
	const id, did = "wh_01JF0000000000000000000000", "dlv_01JF0000000000000000000000"
	f.Add(`{"url":"https://h.example.com/","events":["*"]}`, "", id, did)
	f.Add(`{"url":"https://h.example.com/","events":["workspace.*"],"deploymentIds":[1,1,2],"enabled":false,"includeRefused":true,"description":"d"}`, "first=2", id, did)
	f.Add(`{"deploymentIds":null}`, "status=failed", id, did)
	f.Add(`{"deploymentIds":[0]}`, "after=eyJ4Ijoi", "wh_x", "dlv_")
	f.Add(`{"events":[]}`, "first=201&status=x", "", "")
	f.Add(`[]`, "after=%ff", id, did)
	f.Fuzz(func(t *testing.T, body, query, id, deliveryID string) {
		decodeAll(t, body, query, id, deliveryID)
	})
}

func TestDecodersKeepTheirBounds(t *testing.T) {
	const id = "wh_01JF0000000000000000000000"
	many := `"` + strings.Repeat(`a","`, MaxEvents) + `a"`
	for _, c := range []struct{ body, code string }{
		{`{"url":"https://h.example.com/","events":[` + many + `]}`, errs.CodeInvalidEventPattern},
		{`{"url":"https://h.example.com/","events":["a.*.b"]}`, errs.CodeInvalidEventPattern},
		{`{"url":"","events":["*"]}`, errs.CodeInvalidWebhookURL},
		{`{"url":"https://h.example.com/` + strings.Repeat("a", MaxURLBytes) + `","events":["*"]}`, errs.CodeInvalidWebhookURL},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(c.body))
		r.Header.Set("Content-Type", "application/json")
		r.SetPathValue("id", id)
		_, err := decodeCreate(context.Background(), r)
		if _, code, _, _ := errs.Answer(err); code != c.code {
			t.Errorf("%.60s: code %q (%v), want %s", c.body, code, err, c.code)
		}
	}
	// Duplicates are dropped, deployment ids sorted.
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"url":"https://h.example.com/","events":["*","*"],"deploymentIds":[3,1,3]}`))
	r.Header.Set("Content-Type", "application/json")
	req, err := decodeCreate(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	in := req.(createRequest).In
	if len(in.Events) != 1 || len(in.DeploymentIDs) != 2 || in.DeploymentIDs[0] != 1 || !in.Enabled {
		t.Fatalf("decoded %+v", in)
	}
}
