package integration

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// maxAuditLine is the most bytes proxy/audit/README.md lets one
// record take, its line break included.
const maxAuditLine = 16 << 10

// cutMarker is the marker proxy/audit/README.md says ends a value cut to its bound.
func cutMarker(value string) string {
	sum := sha256.Sum256([]byte(value))
	return fmt.Sprintf("…[cut: %d bytes, sha256:%s]", len(value), hex.EncodeToString(sum[:8]))
}

// TestAuditFloodSpoilsNothing: clients sending a 60 KB User-Agent to a
// disallowed path, on eight connections at once, make the audit log no
// longer than 16 KiB a record (before, JSON escaping made each 360 KB and
// the log fell so far behind that robotsgate answered 503 to everyone);
// their User-Agent is recorded cut, with its length and hash; and another
// client, meanwhile, gets exactly the answers it would get alone.
func TestAuditFloodSpoilsNothing(t *testing.T) {
	t.Parallel()
	const (
		flooders      = 8
		floodsPerConn = 100 // at most: the flood ends with the other client
		ordinary      = 60
	)
	// One User-Agent of letters, which is a product token whole, so the
	// token is as long; one of characters JSON's HTML escaping would make
	// six bytes each.
	floodUAs := []string{strings.Repeat("A", 60<<10), strings.Repeat("<>&", 20<<10)}

	o := newRecorder(t, false)
	p := startProxy(t)

	var (
		flooded   atomic.Int64 // flood requests answered
		floodErrs = make(chan error, flooders)
		started   sync.WaitGroup // each flooder has had an answer
		stop      = make(chan struct{})
		wg        sync.WaitGroup
	)
	started.Add(flooders)
	for i := range flooders {
		conn := p.dial(t)
		ua := floodUAs[i%len(floodUAs)]
		wg.Go(func() {
			first := true
			defer func() {
				if first {
					started.Done()
				}
			}()
			br := bufio.NewReader(conn)
			for n := range floodsPerConn {
				select {
				case <-stop:
					return
				default:
				}
				conn.SetDeadline(time.Now().Add(requestTimeout))
				target := fmt.Sprintf("http://%s/private/flood-%d-%d", o.addr, i, n)
				if _, err := io.WriteString(conn, "GET "+target+" HTTP/1.1\r\nHost: "+o.addr+"\r\nUser-Agent: "+ua+"\r\n\r\n"); err != nil {
					floodErrs <- fmt.Errorf("flooder %d, request %d: %w", i, n, err)
					return
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					floodErrs <- fmt.Errorf("flooder %d, request %d: reading the answer: %w", i, n, err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden {
					floodErrs <- fmt.Errorf("flooder %d, request %d: status %d, want 403", i, n, resp.StatusCode)
					return
				}
				flooded.Add(1)
				if first {
					first = false
					started.Done()
				}
			}
		})
	}
	started.Wait()

	// The other client, while the flood goes on: a crawler that fetches
	// what robots.txt allows and, now and then, what it does not.
	client := p.client(t)
	for i := range ordinary {
		path, status := fmt.Sprintf("/open/page-%d", i), http.StatusOK
		if i%5 == 4 {
			path, status = fmt.Sprintf("/private/ordinary-%d", i), http.StatusForbidden
		}
		r := get(t, client, "http://"+o.addr+path, crawlerUA)
		if r.status != status {
			t.Errorf("GET %s during the flood: status %d, want %d; body %q", path, r.status, status, clip(string(r.body)))
		} else if status == http.StatusOK && !strings.HasPrefix(string(r.body), "secret page "+path+" ") {
			t.Errorf("GET %s during the flood: body %q, want the origin's page", path, r.body)
		}
	}
	if flooded.Load() == int64(flooders*floodsPerConn) {
		t.Log("the flood ended before the other client did")
	}
	close(stop)
	wg.Wait()
	close(floodErrs)
	for err := range floodErrs {
		t.Error(err)
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	data, err := os.ReadFile(p.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	var floodBytes int64
	for i, line := range lines {
		if len(line) > maxAuditLine {
			t.Errorf("audit line %d takes %d bytes, more than %d: %.200s...", i+1, len(line), maxAuditLine, line)
		}
		if bytes.Contains(line, []byte("/private/flood-")) {
			floodBytes += int64(len(line))
		}
	}

	recs := p.audit()
	var floodRecs, ordinaryRecs int
	for _, rec := range recs {
		switch {
		case strings.Contains(rec.URL, "/private/flood-"):
			floodRecs++
			checkFloodRecord(t, rec, floodUAs)
		case strings.Contains(rec.URL, "/open/page-") || strings.Contains(rec.URL, "/private/ordinary-"):
			ordinaryRecs++
			if rec.UserAgent != crawlerUA || rec.raw["cut"] != nil {
				t.Errorf("the other client's record of %s: user_agent %q, cut %v", rec.URL, rec.UserAgent, rec.raw["cut"])
			}
		}
	}
	if int64(floodRecs) != flooded.Load() || ordinaryRecs != ordinary {
		t.Errorf("%d flood records for %d flood answers, %d records of the other client's %d requests; want one each", floodRecs, flooded.Load(), ordinaryRecs, ordinary)
	}
	if floodRecs > 0 {
		t.Logf("%d flood requests took %d bytes of audit log each", floodRecs, floodBytes/int64(floodRecs))
	}
	for _, target := range o.targets() {
		if strings.HasPrefix(target, "/private/") {
			t.Errorf("the origin received %s", target)
		}
	}

	// The report reads the log whole: no line is malformed.
	doc := jsonReport(t, p.auditLog)
	if doc.Malformed != 0 || doc.Records != int64(len(recs)) {
		t.Errorf("the report counts %d records and %d malformed lines (%v), want %d and none", doc.Records, doc.Malformed, doc.MalformedLines, len(recs))
	}
}

// checkFloodRecord checks the record of a request with one of uas: its
// User-Agent, and its token when that is the User-Agent whole, are a
// start of it and the marker, and cut names them.
func checkFloodRecord(t *testing.T, rec auditRecord, uas []string) {
	t.Helper()
	if rec.Verdict != "disallow" || rec.Status != http.StatusForbidden || rec.Forwarded {
		t.Errorf("flood record of %s: verdict %s, status %d, forwarded %v", rec.URL, rec.Verdict, rec.Status, rec.Forwarded)
	}
	var ua string
	for _, u := range uas {
		if strings.HasSuffix(rec.UserAgent, cutMarker(u)) {
			ua = u
		}
	}
	if ua == "" || !strings.HasPrefix(ua, strings.TrimSuffix(rec.UserAgent, cutMarker(ua))) {
		t.Errorf("flood record of %s: user_agent %q, want a start of the User-Agent and its marker", rec.URL, clip(rec.UserAgent))
		return
	}
	want := []string{"user_agent"}
	if ua == uas[0] { // the token is the User-Agent whole
		if !strings.HasSuffix(rec.Token, cutMarker(ua)) || !strings.HasPrefix(ua, strings.TrimSuffix(rec.Token, cutMarker(ua))) {
			t.Errorf("flood record of %s: token %q, want a start of the User-Agent and its marker", rec.URL, clip(rec.Token))
		}
		want = append(want, "token")
	}
	var cut []string
	if raw, err := json.Marshal(rec.raw["cut"]); err != nil || json.Unmarshal(raw, &cut) != nil || !slices.Equal(cut, want) {
		t.Errorf("flood record of %s: cut %v, want %q", rec.URL, rec.raw["cut"], want)
	}
}
