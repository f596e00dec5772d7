package proxy

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"robotsgate/robots/fetch"
)

// fetchContext is the context the rules of r's origin are looked up on: r's,
// naming the client whose share of the robots.txt fetch slots a fetch for
// it takes (see fetch.ClientContext). It lives in d, which every request
// allocates anyway, so that a request whose robots.txt is cached pays for
// no context of its own.
func (d *decision) fetchContext(r *http.Request) *fetch.ClientContext {
	d.fetchCtx = fetch.ClientContext{Context: r.Context(), Client: d.shareKey()}
	return &d.fetchCtx
}

// shareKey is the client whose share of robotsgate's bounded resources
// (robots.txt fetch slots, costly decisions) a request takes: its
// credential's name once identified, else its address's clientKey, as its
// connection was counted by.
func (d *decision) shareKey() string {
	if d.who.credential != "" {
		return d.who.credential
	}
	return clientKey(d.asked.client)
}

// noFetchSlot answers a request whose robots.txt was not fetched, or not
// parsed, for want of a free fetch or parse slot: robotsgate's own limit,
// not the origin's answer, so 503 with Retry-After, never a verdict. It
// returns nil for any other result.
func (d *decision) noFetchSlot(result *fetch.Result) *page {
	if result.Err == nil {
		return nil // the usual case, without the cost of errors.As
	}
	if _, ok := errors.AsType[*fetch.ParseSlotError](result.Err); ok {
		p := d.failPage(http.StatusServiceUnavailable, "robotsgate has no free robots.txt parse slot: all of them are in use (one per CPU)", result.Err)
		// A parse takes milliseconds: the line is short.
		p.header.Set("Retry-After", "1")
		return p
	}
	slotErr, ok := errors.AsType[*fetch.SlotError](result.Err)
	if !ok {
		return nil
	}
	why := "robotsgate has no free robots.txt fetch slot for this client: all of them are in use (ROBOTSGATE_MAX_FETCHES)"
	if slotErr.Held >= slotErr.PerClient {
		why = "robotsgate has no free robots.txt fetch slot for this client: its robots.txt fetches under way fill its share (ROBOTSGATE_MAX_FETCHES_PER_CLIENT)"
	}
	p := d.failPage(http.StatusServiceUnavailable, why, result.Err)
	// Every slot held now is free again within a fetch's time limit.
	p.header.Set("Retry-After", strconv.Itoa(max(int((slotErr.Timeout+time.Second-1)/time.Second), 1)))
	return p
}
