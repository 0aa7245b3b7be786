package platformctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// CatalogEntry is one account-wide group or user-attribute definition the seed creates.
type CatalogEntry struct {
	Path string         // "/api/v1/groups" or "/api/v1/user-attributes"
	Body map[string]any // the create request
}

// AcmeCatalog is what `seed` creates for acme: the groups and attributes the embed
// examples resolve against without creator mode.
var AcmeCatalog = []CatalogEntry{
	{"/api/v1/groups", map[string]any{"name": "sales", "description": "Sales team"}},
	{"/api/v1/groups", map[string]any{"name": "marketing", "description": "Marketing team"}},
	{"/api/v1/user-attributes", map[string]any{"name": "region", "type": "string", "displayName": "Region"}},
	{"/api/v1/user-attributes", map[string]any{"name": "quota", "type": "number", "displayName": "Quota"}},
}

// SeedCatalog creates entries through the gateway's API with an admin API key; an
// entry that already exists (409) is left as it is, so seeding twice is harmless.
func SeedCatalog(ctx context.Context, gateway, apiKey string, entries []CatalogEntry) error {
	client := &http.Client{Timeout: 15 * time.Second}
	for _, e := range entries {
		body, err := json.Marshal(e.Body)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(gateway, "/")+e.Path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Api-Key "+apiKey)
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("seed catalog %s %v: is the stack running? %w", e.Path, e.Body["name"], err)
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusConflict {
			return fmt.Errorf("seed catalog %s %v: %d %s", e.Path, e.Body["name"], resp.StatusCode, strings.TrimSpace(string(msg)))
		}
	}
	return nil
}
