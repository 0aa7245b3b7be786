package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The audit row: a page of the audit trail, and, printed under the table, how long
// after an action's answer its event is readable (the README states that delay).

// auditDelaySamples is how many serial actions the delay is measured on.
const auditDelaySamples = 40

func setupAuditList(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	acme := p.Seed.Accounts["acme"]
	token := acme.Users["admin"].Bearer
	admin := "Bearer " + token
	c := newAPIClient(p.Gateway)
	measureAuditDelay(ctx, c, token, acme.Deployments[1].ID)
	path := "/api/v1/audit?first=20&action=workspace.folder.create"
	countPerCall(ctx, p, "audit trail (a page of 20 events)", 20, nil, func(ctx context.Context, _ int) error {
		return c.do(ctx, http.MethodGet, path, admin, nil, http.StatusOK, nil)
	})
	t := opsTarget(p, vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodGet, URL: p.Gateway + path,
		Header: http.Header{"Authorization": {admin}}}))
	// FerretDB answers by scanning every event the table's rows recorded (MongoDB reads
	// an index range): one worker, so the serializing proxy's queue does not time the
	// rows out; the command counts above are the figure that carries over.
	t.Workers = 1
	return t, nil
}

// measureAuditDelay creates folders one at a time and, after each answer, polls the
// trail every 5 ms until the folder's event is there. A poll is itself a read of the
// trail (a scan on FerretDB), so the delay is known to within the poll that found the
// event: its duration is printed beside the delay.
func measureAuditDelay(ctx context.Context, c *apiClient, token string, dep int64) {
	admin := "Bearer " + token
	var delays, polls []time.Duration
	for i := range auditDelaySamples {
		id, err := c.createFolder(ctx, token, dep, fmt.Sprintf("audit delay %d-%d", time.Now().UnixNano(), i), 0)
		if err != nil {
			addCountLine("audit delay: not measured (%v)", err)
			return
		}
		answered := time.Now()
		q := url.Values{"action": {"workspace.folder.create"}, "targetId": {fmt.Sprint(id)}}
		for {
			var pg struct{ Items []struct{} }
			polled := time.Now()
			if err := c.do(ctx, http.MethodGet, "/api/v1/audit?"+q.Encode(), admin, nil, http.StatusOK, &pg); err != nil {
				addCountLine("audit delay: not measured (%v)", err)
				return
			}
			if len(pg.Items) > 0 {
				delays, polls = append(delays, time.Since(answered)), append(polls, time.Since(polled))
				break
			}
			if time.Since(answered) > 30*time.Second {
				addCountLine("audit delay: an event was not readable within 30 s")
				return
			}
			time.Sleep(5 * time.Millisecond) // polling interval
		}
	}
	slices.Sort(delays)
	slices.Sort(polls)
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	addCountLine("audit trail: an action's event is readable %s after its answer (median of %d serial folder creations; p90 %s, max %s), measured to within the poll that found it (median %s)",
		ms(delays[len(delays)/2]), len(delays), ms(delays[len(delays)*9/10]), ms(delays[len(delays)-1]), ms(polls[len(polls)/2]))
}
