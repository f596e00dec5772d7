package robots

import (
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func BenchmarkParse(b *testing.B) {
	files := corpusFiles(b)
	bodies := make([][]byte, 0, len(files))
	total := 0
	for _, body := range files {
		bodies = append(bodies, body)
		total += min(len(body), DefaultMaxBytes)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		for _, body := range bodies {
			Parser{}.Parse(body)
		}
	}
}

// checkPaths are requests a crawler makes on twitter.com, whose 2022
// robots.txt (82 rules in 6 groups, most with wildcards) is the benchmark's
// realistic file.
var checkPaths = []string{
	"/jack/status/20",
	"/search?q=golang&src=typed_query",
	"/hashtag/go?src=hash",
	"/i/api/graphql/x/UserByScreenName",
	"/jack/followers",
	"/settings/deactivated",
	"/?_escaped_fragment_=home",
	"/explore",
	"/search/users?q=x",
	"/jack/media?lang=en",
}

func BenchmarkCheck(b *testing.B) {
	r := Parser{}.Parse(corpusFiles(b)["twitter_2022.texting_robots.txt"])
	tokens := []string{"Googlebot", "bingbot", "GPTBot"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Check(tokens[i%len(tokens)], checkPaths[i%len(checkPaths)])
		i++
	}
}

// BenchmarkCheckReadings is BenchmarkCheck through CheckReadings, which a
// proxy calls: on the same paths, none of which an origin reads otherwise,
// it must cost about what Check does. "tricky" is a path with dot
// segments, escapes and parameters, whose every reading is judged.
func BenchmarkCheckReadings(b *testing.B) {
	r := Parser{}.Parse(corpusFiles(b)["twitter_2022.texting_robots.txt"])
	tokens := []string{"Googlebot", "bingbot", "GPTBot"}
	b.Run("same-paths", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			r.CheckReadings(tokens[i%len(tokens)], checkPaths[i%len(checkPaths)])
			i++
		}
	})
	b.Run("tricky", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.CheckReadings("bingbot", "/jack/../jack/%2e/media;v=1//x%2Fy?lang=en")
		}
	})
}

// The pathological pattern against a 10,000-byte path, beside a plain
// prefix pattern on the same path: the cost must stay of the same order.
func BenchmarkCheckLongPath(b *testing.B) {
	path := "/" + strings.Repeat("a", 10000)
	for _, bench := range []struct{ name, pattern string }{
		{"plain", "/aaaaaaaaab"},
		{"wildcards", "/*a*a*a*a*a*a*a*a*a*a*b$"},
	} {
		r := Parser{}.Parse([]byte("User-agent: *\nDisallow: " + bench.pattern + "\n"))
		b.Run(bench.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Check("bot", path)
			}
		})
	}
}

// BenchmarkRetained reports the heap a parsed file keeps alive and its
// heap objects for the corpus median, stackoverflow.com (77 rules in 6
// groups) and the largest file, measured after a GC, beside
// RetainedBytes' estimate of it.
func BenchmarkRetained(b *testing.B) {
	files := corpusFiles(b)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.SortFunc(names, func(x, y string) int { return len(files[x]) - len(files[y]) })
	for _, bench := range []struct{ label, name string }{
		{"median", names[len(names)/2]},
		{"ebay", "www.ebay.com.txt"}, // the median the issue names
		{"stackoverflow", "stackoverflow.com.txt"},
		{"largest", names[len(names)-1]}, // docs.oracle.com.txt: real rules, over the parse limit
	} {
		b.Run(bench.label, func(b *testing.B) {
			measured, estimate, objects := retainedHeapObjects(Parser{}, files[bench.name])
			for b.Loop() {
				Parser{}.Parse(files[bench.name])
			}
			b.ReportMetric(float64(len(files[bench.name])), "file-B")
			b.ReportMetric(float64(measured), "heap-B")
			b.ReportMetric(float64(estimate), "estimate-B")
			b.ReportMetric(objects, "objects")
		})
	}
}

// retainedHeap parses body with p several times, keeps the results, and
// returns the live heap per result, with RetainedBytes' figure.
func retainedHeap(p Parser, body []byte) (measured, estimate int64) {
	measured, estimate, _ = retainedHeapObjects(p, body)
	return measured, estimate
}

// retainedHeapObjects is retainedHeap, and the heap objects per result.
func retainedHeapObjects(p Parser, body []byte) (measured, estimate int64, objects float64) {
	const copies = 20
	keep := make([]*Robots, copies)
	var before, after runtime.MemStats
	// Twice: sync.Pool's victims, from fmt and testing, are freed by the
	// second collection, which must not fall between the readings.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		keep[i] = p.Parse(body)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	measured = (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / copies
	objects = float64(int64(after.HeapObjects)-int64(before.HeapObjects)) / copies
	estimate = keep[0].RetainedBytes()
	runtime.KeepAlive(keep)
	return measured, estimate, objects
}

func TestRetainedBytesEstimate(t *testing.T) {
	files := corpusFiles(t)
	for _, name := range []string{"twitter_2022.texting_robots.txt", "en.wikipedia.org_2024.txt", "github.com_2024.txt", "ai.robots.txt-generated.txt", "docs.oracle.com.txt"} {
		measured, estimate := retainedHeap(Parser{}, files[name])
		// A cache budget charges the estimate: it follows the
		// allocator's size classes, and must be within 15% of the heap.
		if estimate < measured*85/100 || estimate > measured*115/100 {
			t.Errorf("%s: RetainedBytes %d, measured heap %d", name, estimate, measured)
		}
		t.Logf("%s: %d bytes of text retain %d bytes (estimate %d)", name, len(files[name]), measured, estimate)
	}
}

// rulesRobots is a "*" group of n rules, rule(i) giving the i-th value.
func rulesRobots(n int, rule func(i int) string) *Robots {
	var b strings.Builder
	b.WriteString("User-agent: *\n")
	for i := 1; i <= n; i++ {
		b.WriteString("Disallow: ")
		b.WriteString(rule(i))
		b.WriteByte('\n')
	}
	return Parser{MaxBytes: 16 << 20}.Parse([]byte(b.String()))
}

// groupsRobots is a group allowing every path to "bot", then n groups
// naming it, each disallowing "/bN" followed by end.
func groupsRobots(n int, end string) *Robots {
	var b strings.Builder
	b.WriteString("User-agent: bot\nAllow: /\n")
	for i := range n {
		b.WriteString("User-agent: bot\nDisallow: /b")
		b.WriteString(strconv.Itoa(i))
		b.WriteString(end)
		b.WriteByte('\n')
	}
	return Parser{MaxBytes: 16 << 20}.Parse([]byte(b.String()))
}

// worstCaseRobots is the attack file: 26,000 wildcard rules
// "Disallow: /*zqN", each a search of the whole path.
func worstCaseRobots() *Robots {
	return rulesRobots(26000, func(i int) string { return "/*zq" + strconv.Itoa(i) })
}

// worstCasePath is an 8 KiB path with 32 readings whose every byte pair
// starts a near match of the rules of worstCaseRobots.
func worstCasePath() string {
	head := `/a/./b//c;d%2Fe\f/`
	return head + strings.Repeat("zq", (8<<10-len(head))/2)
}

// BenchmarkCheckReadingsWorstCase is the attack: 26,000 wildcard
// rules against an 8 KiB path with 32 readings, refused as too costly.
func BenchmarkCheckReadingsWorstCase(b *testing.B) {
	r := worstCaseRobots()
	path := worstCasePath()
	b.ReportAllocs()
	for b.Loop() {
		r.CheckReadings("bot", path)
	}
}

// BenchmarkDecisionCost measures decisions that each stress one term of
// the cost estimate, most sized to come just under MaxDecisionCost, beside
// their estimate: ns/unit must stay below 1, the estimate being an upper
// bound of the nanoseconds a decision takes.
func BenchmarkDecisionCost(b *testing.B) {
	for _, bench := range costlyDecisions() {
		b.Run(bench.name, func(b *testing.B) {
			j := bench.r.Prepare("bot", bench.path)
			if v := j.Verdict(); v.Cause == CauseTooCostly || v.Cause == CauseAmbiguous {
				b.Fatalf("%s: %s", bench.name, v.Reason())
			}
			b.ReportAllocs()
			for b.Loop() {
				bench.r.CheckReadings("bot", bench.path)
			}
			b.ReportMetric(float64(j.Cost()), "units/op")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(j.Cost()), "ns/unit")
		})
	}
}

type costlyDecision struct {
	name string
	r    *Robots
	path string
}

func costlyDecisions() []costlyDecision {
	a := strings.Repeat("a", 1<<13)
	abc := strings.Repeat("abcdefgh", 1<<10)
	x := func(int) string { return "/*x" }
	return []costlyDecision{
		// Literal rules sharing 100 bytes with each of 16 readings.
		{"literal", rulesRobots(40000, func(i int) string { return "/" + a[:100] + strconv.Itoa(i) }), "/" + a[:200] + "/./b//c;d%2Fe/" + a[:1800]},
		// Short literals searched for along a path of near matches.
		{"short-needles", rulesRobots(574, func(i int) string { return "/*abcdef" + strconv.Itoa(i%10) }), "/" + abc[:8191]},
		// Literals over 64 bytes, searched for by Rabin-Karp.
		{"long-needles", rulesRobots(574, func(i int) string { return "/*" + a[:100] + strconv.Itoa(i) }), "/" + a[:8191]},
		// Patterns of a thousand stars.
		{"stars", rulesRobots(580, func(i int) string { return "/" + strings.Repeat("*a", 1000) + strconv.Itoa(i) }), "/" + a[:2047]},
		// Anchored rules tried on the query-less form.
		{"query", rulesRobots(40000, func(i int) string { return "/*" + a[:10] + strconv.Itoa(i) + "$" }), "/" + a[:4095] + "?q"},
		// A group per rule, each naming the crawler, behind one that
		// allows every path: each rule is tried, after the best so far.
		{"groups", groupsRobots(36000, ""), "/" + a[:200] + "/./b//c;d%2Fe/" + a[:1800]},
		{"groups-query", groupsRobots(18000, "$"), "/" + a[:200] + "/./b//c;d%2Fe/" + a[:1800] + "?q"},
		// One rule; 64 readings of 8 KiB, listed and normalised.
		{"readings", rulesRobots(1, x), `/%2F%2e%5C/./..;\.a/` + abc[:8150]},
		// One rule; 8 KiB of raw UTF-8, escaped in each of 16 readings.
		{"escapes", rulesRobots(1, x), "/a/./b//c;d%2Fe" + strings.Repeat("/\xE3\x83\x84", 2037)},
		// One rule; 8 KiB of dot segments in 24 readings.
		{"dot-segments", rulesRobots(1, x), "/a/./b//c;d%2Fe" + strings.Repeat("/a/..", 1630)},
	}
}

// BenchmarkUsage: on a file without usage lines Usage costs nothing
// measurable and allocates nothing ("none", the realistic twitter.com
// file); on the same file with Cloudflare's managed line and a few
// path-scoped Content-Usage lines, it costs a match per line and one
// allocation for the result ("lines", "lines-tricky" with a path that has
// readings), and nothing for a token whose group has none ("other-group").
func BenchmarkUsage(b *testing.B) {
	body := corpusFiles(b)["twitter_2022.texting_robots.txt"]
	plain := Parser{}.Parse(body)
	withLines := Parser{}.Parse(append([]byte("User-agent: *\nContent-Signal: search=yes, ai-train=no\n"+
		"Content-Usage: train-ai=n\nContent-Usage: /jack/ train-ai=y\nContent-Usage: /*.pdf$ train-ai=n\n\n"), body...))
	tokens := []string{"Googlebot", "bingbot", "GPTBot"}
	for _, bench := range []struct {
		name   string
		r      *Robots
		tokens []string
		paths  []string
	}{
		{"none", plain, tokens, checkPaths},
		{"other-group", withLines, []string{"Googlebot"}, checkPaths},
		{"lines", withLines, []string{"GPTBot"}, checkPaths},
		{"lines-tricky", withLines, []string{"GPTBot"}, []string{"/jack/../jack/%2e/media;v=1//x%2Fy?lang=en"}},
	} {
		b.Run(bench.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				bench.r.Usage(bench.tokens[i%len(bench.tokens)], bench.paths[i%len(bench.paths)])
				i++
			}
		})
	}
}
