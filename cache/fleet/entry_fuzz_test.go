package fleet

import (
	"fmt"
	"testing"
)

// FuzzDecodeEntry feeds decodeEntry hashes as Redis may hold them: it must
// never panic, and what it accepts must survive a round trip.
func FuzzDecodeEntry(f *testing.F) {
	f.Add("1", "User-agent: *", "ok", "ok", "0", "0", "0", "1700000000000", "1700000060000", "1700000000000")
	f.Add("1", "\x00\xff", "ok", "unreachable", "0", "1", "3", "1700000000000", "1700000060000", "0")
	f.Add("2", "", "", "", "", "", "", "", "", "")
	f.Add("1", "x", "\xff", "ok", "1", "1", "-1", "9223372036854775807", "-1", "1e3")
	f.Fuzz(func(t *testing.T, v, value, outcome, lastOutcome, failed, stale, failures, loadedAt, expiresAt, goodAt string) {
		e, ok := decodeEntry(map[string]string{
			fieldVersion: v, fieldValue: value, fieldOutcome: outcome, fieldLastOutcome: lastOutcome,
			fieldFailed: failed, fieldStale: stale, fieldFailures: failures,
			fieldLoadedAt: loadedAt, fieldExpiresAt: expiresAt, fieldGoodAt: goodAt,
		})
		if !ok {
			return
		}
		pairs := encodeEntry(e)
		fields := map[string]string{}
		for i := 0; i < len(pairs); i += 2 {
			fields[pairs[i].(string)] = fmt.Sprint(pairs[i+1])
		}
		fields[fieldValue] = string(e.Value)
		again, ok := decodeEntry(fields)
		if !ok || fmt.Sprint(again) != fmt.Sprint(e) {
			t.Errorf("round trip of %+v gave %+v, %v", e, again, ok)
		}
	})
}
