package robots

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// productTokenCases are the examples of the issue and the hard cases of
// testdata/useragents/README.md §3, with the tokens stated there.
var productTokenCases = []struct {
	name, ua, want string
}{
	// The examples.
	{"bingbot", "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "bingbot"},
	{"GPTBot in the KHTML comment", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.0; +https://openai.com/gptbot)", "GPTBot"},
	{"bare product", "Googlebot-Image/1.0", "Googlebot-Image"},
	{"HTTP library", "curl/8.5.0", "curl"},
	{"empty", "", ""},
	{"blank", " \t ", ""},

	// §3.1: the crawler among browser products.
	{"Googlebot smartphone", "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/41.0.2272.96 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "Googlebot"},
	{"token in the platform comment", "Mozilla/5.0 (X11; Linux x86_64; Storebot-Google/1.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/79.0.3945.88 Safari/537.36", "Storebot-Google"},
	{"token after the browser", "Mozilla/5.0 (Linux; Android 5.0; SM-G900P Build/LRX21T) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/47.0.5267.1259 Mobile Safari/537.36; Bytespider", "Bytespider"},
	{"token after the browser with its own comment", "Mozilla/5.0 (Windows NT 6.1) AppleWebKit/537.1 (KHTML, like Gecko) Chrome/21.0.1180.89 Safari/537.1; 360Spider(compatible; HaosouSpider; http://www.haosou.com/help/help_3_2.html)", "360Spider"},
	{"compatible after the KHTML comment", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot", "ChatGPT-User"},
	{"crawler in a phone UA", "KDDI-CA31 UP.Browser/6.2.0.7.3.129 (GUI) MMP/2.0 (compatible; ichiro/mobile goo; +http://help.goo.ne.jp/help/article/1142/)", "ichiro"},

	// §3.2: Google's special-case crawlers.
	{"AdsBot-Google", "AdsBot-Google (+http://www.google.com/adsbot.html)", "AdsBot-Google"},
	{"AdsBot-Google-Mobile", "Mozilla/5.0 (iPhone; CPU iPhone OS 9_1 like Mac OS X) AppleWebKit/601.1.46 (KHTML, like Gecko) Version/9.0 Mobile/13B143 Safari/601.1 (compatible; AdsBot-Google-Mobile; +http://www.google.com/mobile/adsbot.html)", "AdsBot-Google-Mobile"},
	{"AdsBot-Google-Mobile-Apps", "AdsBot-Google-Mobile-Apps", "AdsBot-Google-Mobile-Apps"},
	{"Mediapartners-Google bare", "Mediapartners-Google", "Mediapartners-Google"},
	{"Mediapartners-Google", "Mozilla/5.0 (iPhone; U; CPU iPhone OS 10_0 like Mac OS X; en-us) AppleWebKit/602.1.38 (KHTML, like Gecko) Version/10.0 Mobile/14A5297c Safari/602.1 (compatible; Mediapartners-Google/2.1; +http://www.google.com/bot.html)", "Mediapartners-Google"},
	{"unrelated Adsbot", "Mozilla/5.0 (compatible; Adsbot/3.1; +https://seostar.co/robot/)", "Adsbot"},

	// §3.3, §3.4: more than one token; robots.txt-only tokens.
	{"Googlebot-Video", "Googlebot-Video/1.0", "Googlebot-Video"},
	{"Googlebot-News", "Googlebot-News", "Googlebot-News"},
	{"Google-Extended as a UA", "Mozilla/5.0 (compatible; Google-Extended/1.0; +http://www.google.com/bot.html)", "Google-Extended"},

	// §3.5: UAs that name another crawler.
	{"treat like", "Mozilla/5.0 (compatible;acapbot/0.1;treat like Googlebot)", "acapbot"},
	{"bare word after a versioned head", "Gwene/1.0 (The gwene.org rss-to-news gateway) Googlebot", "Gwene"},
	{"compatible with", "SentiBot www.sentibot.eu (compatible with Googlebot)", "SentiBot"},
	{"like in the head comment", "Feedly/1.0 (+http://www.feedly.com/fetcher.html; like FeedFetcher-Google)", "Feedly"},
	{"like in a comment", "TelegramBot (like TwitterBot)", "TelegramBot"},
	{"fake Googlebot", "Mozilla/5.0 AppleWebKit (compatible; s4a-probe-bot/1.0; Fake-Googlebot; +https://www.seo4ajax.com/webscraper)", "s4a-probe-bot"},
	{"following", "Mozilla/5.0 (compatible; MSIE or Firefox mutant; not on Windows server;) Daumoa/4.0 (Following Mediapartners-Google)", "Daumoa"},
	{"only a reference", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 (like Googlebot)", ""},
	{"URL naming Google", "Googlebot/2.1 (+http://www.google.com/bot.html)", "Googlebot"},
	{"crawler in the head comment", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Ubuntu Chromium/61.0.3163.100 Chrome/61.0.3163.100 Safari/537.36 PingdomPageSpeed/1.0 (pingbot/2.0; +http://www.pingdom.com/)", "PingdomPageSpeed"},

	// §3.6: tokens outside RFC 9309's identifier; the matcher keeps
	// letters, digits and "!$%&'+-.^_`|~" and cuts at anything else.
	{"digits and non-numeric version", "Mozilla/5.0 (compatible; MJ12bot/v1.4.8; http://mj12bot.com/)", "MJ12bot"},
	{"leading digits", "Mozilla/5.0 (compatible; MSIE 9.0; Windows NT 6.1; Trident/5.0); 360Spider", "360Spider"},
	{"digit inside", "AI2Bot", "AI2Bot"},
	{"underscore", "W3C_Validator/1.3", "W3C_Validator"},
	{"dot and underscore", "Mozilla/5.0 (compatible; Linux x86_64; Mail.RU_Bot/2.0; +http://go.mail.ru/help/robots)", "Mail.RU_Bot"},
	{"host-like name with underscore", "Mozilla/5.0 (compatible; archive.org_bot +http://www.archive.org/details/archive.org_bot)", "archive.org_bot"},
	{"exclamation inside", "Y!J-BRW/1.0 crawler (http://help.yahoo.co.jp/help/jp/search/indexing/indexing-15.html)", "Y!J-BRW"},
	{"multi-word name, as the matcher cuts it", "Linguee Bot (http://www.linguee.com/bot)", "Linguee"},
	{"multi-word name with descriptor", "Sidetrade indexer bot", "Sidetrade"},
	{"multi-word versioned name", "Screaming Frog SEO Spider/5.1", "Screaming"},
	{"descriptor after a name", "Mozilla/5.0 (compatible; SISTRIX Crawler; http://crawler.sistrix.net/)", "SISTRIX"},
	{"descriptor standing alone", "Mozilla/5.0 (compatible; Spider; +https://www.spider.com/)", "Spider"},
	{"hyphenated", "meta-webindexer/1.1 (+https://developers.facebook.com/docs/sharing/webmasters/crawler)", "meta-webindexer"},
	{"digits and underscore", "peer39_crawler/1.0", "peer39_crawler"},

	// A header that is one RFC 9309 product token is that token, unchanged,
	// as Google's matcher reads it: nothing dropped, single letters kept.
	{"single letter", "V", "V"},
	{"leading underscore", "_Y", "_Y"},
	{"trailing underscore", "GPTBot_", "GPTBot_"},
	{"trailing hyphen", "cQyS-", "cQyS-"},
	{"only a hyphen", "-", "-"},
	{"a browser word alone", "Mozilla", "Mozilla"},
	{"the word bot alone", "bot", "bot"},
	{"a product token with a version is read as a header", "GPTBot_/1.0", "GPTBot"},

	// §3.7: variant suffixes stay: RFC 9309 matches the whole token.
	{"DuckDuckBot-Https", "Mozilla/5.0 (compatible; DuckDuckBot-Https/1.1; https://duckduckgo.com/duckduckbot)", "DuckDuckBot-Https"},
	{"msnbot-media", "msnbot-media/1.1 (+http://search.msn.com/msnbot.htm)", "msnbot-media"},
	{"Exabot-Images", "Mozilla/5.0 (compatible; Exabot-Images/3.0; +http://www.exabot.com/go/robot)", "Exabot-Images"},
	{"Baiduspider-render", "Mozilla/5.0 (compatible; Baiduspider-render/2.0; +http://www.baidu.com/search/spider.html)", "Baiduspider-render"},
	{"version after a space", "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", "Slackbot-LinkExpanding"},
	{"SemrushBot-SA", "Mozilla/5.0 (compatible; SemrushBot-SA/0.97; +http://www.semrush.com/bot.html)", "SemrushBot-SA"},
	{"coccocbot-image", "Mozilla/5.0 (compatible; coccocbot-image/1.0; +http://help.coccoc.com/searchengine)", "coccocbot-image"},

	// §3.8: frameworks and libraries.
	{"heritrix", "Mozilla/5.0 (compatible; heritrix/3.1.1 +http://www.mixdata.com)", "heritrix"},
	{"heritrix with archive.org_bot in a URL", "Mozilla/5.0 (compatible; heritrix/3.1.1-SNAPSHOT-20120116.200628 +http://www.archive.org/details/archive.org_bot)", "heritrix"},
	{"Wget", "Wget/1.20.3 (linux-gnu)", "Wget"},
	{"python-requests", "python-requests/2.9.2", "python-requests"},
	{"Go-http-client", "Go-http-client/1.1", "Go-http-client"},
	{"Scrapy", "Scrapy/1.0.3 (+http://scrapy.org)", "Scrapy"},

	// §3.10: user-triggered fetchers; the token is clear.
	{"Claude-User", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Claude-User/1.0; +Claude-User@anthropic.com)", "Claude-User"},
	{"Google-Read-Aloud", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/41.0.2272.118 Safari/537.36 (compatible; Google-Read-Aloud; +https://developers.google.com/search/docs/crawling-indexing/overview-google-crawlers)", "Google-Read-Aloud"},

	// §3.11: encoding oddities.
	{"plus for spaces", "Mozilla/5.0+(compatible;+PiplBot;+http://www.pipl.com/bot/)", "PiplBot"},
	{"unclosed parenthesis", "Mozilla/5.0 (compatible; YandexAccessibilityBot/3.0; +http://yandex.com/bots", "YandexAccessibilityBot"},
	{"non-numeric version", "MJ12bot/v1.4.5", "MJ12bot"},
	{"Yeti", "Mozilla/5.0 (compatible; Yeti/1.1; +http://naver.me/bot)", "Yeti"},
	{"after Yahoo!", "Mozilla/5.0 (compatible; Yahoo! Slurp/3.0; http://help.yahoo.com/help/us/ysearch/slurp)", "Slurp"},
	{"after Yahoo!, more words", "Mozilla/5.0 (compatible; Yahoo! Slurp China; http://misc.yahoo.com.cn/help.html)", "Slurp"},
	{"quoted", "'Mozilla/5.0 (compatible; DuckDuckBot-Https/1.1; https://duckduckgo.com/duckduckbot)'", "DuckDuckBot-Https"},
	{"e-mail with the crawler's name", "Mozilla/5.0 (compatible; adbeat_bot; +support@adbeat.com; support@adbeat.com)", "adbeat_bot"},
	{"trailing hyphen", "Mozilla/5.0 (compatible; Nitro-; +https://www.nitropack.io/)", "Nitro"},
	{"language tag in a platform comment", "Mozilla/5.0 (X11; U; Linux i686; en-US; rv:1.7.12; ips-agent) Gecko/20050922 Fedora/1.0.7-1.1.fc4 Firefox/1.0.7", "ips-agent"},

	// §3.9, §3.12: negative examples, no token.
	{"Chrome", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36", ""},
	{"Safari", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2.1 Safari/605.1.15", ""},
	{"Firefox", "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0", ""},
	{"MSIE 8 with SLCC2", "Mozilla/4.0 (compatible; MSIE 8.0; Windows NT 6.1; Trident/4.0; SLCC2; .NET CLR 2.0.50727; .NET CLR 3.5.30729; .NET CLR 3.0.30729; Media Center PC 6.0)", ""},
	{"MSIE 8 with SLCC2, WOW64", "Mozilla/4.0 (compatible; MSIE 8.0; Windows NT 6.1; WOW64; Trident/4.0; SLCC2; .NET CLR 2.0.50727; .NET CLR 3.5.30729; .NET CLR 3.0.30729; Media Center PC 6.0; InfoPath.2)", ""},
	{"URL only", "http://seewithkids.com/bot", ""},
	{"e-mail only", "scraping@nytimes.com", ""},
	{"host only", "search.marginalia.nu", ""},
	{"dotted version with trailing dot", "A.0.", ""}, // found by FuzzProductToken
}

// ordinaryBrowsers are User-Agents of everyday browsers; none has a token.
var ordinaryBrowsers = []string{
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.0.0",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/70.0.3538.102 Safari/537.36 Edge/18.19582",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 OPR/106.0.0.0",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Vivaldi/6.5.3206.48",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 YaBrowser/24.1.0.0 Safari/537.36",
	"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
	"Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
	"Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
	"Mozilla/5.0 (X11; Fedora; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:121.0) Gecko/20100101 Firefox/121.0",
	"Mozilla/5.0 (Windows; U; Windows NT 5.1; en-US; rv:1.9.1.3) Gecko/20090824 Firefox/3.5.3 (.NET CLR 3.5.30729)",
	"Mozilla/5.0 (Android 14; Mobile; rv:121.0) Gecko/121.0 Firefox/121.0",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (iPad; CPU OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (Macintosh; U; Intel Mac OS X 10_6_8; en-us) AppleWebKit/534.50 (KHTML, like Gecko) Version/5.1 Safari/534.50",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/120.0.6099.119 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/121.0 Mobile/15E148 Safari/605.1.15",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 EdgiOS/120.2210.150 Mobile/15E148 Safari/605.1.15",
	"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (Linux; Android 13; SM-S901B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/112.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (Linux; Android 14; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (Linux; Android 12; SM-G991B Build/SP1A.210812.016; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/120.0.6099.144 Mobile Safari/537.36",
	"Mozilla/5.0 (Linux; Android 13; SAMSUNG SM-A515F) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/23.0 Chrome/115.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (Linux; Android 10; HD1913) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.144 Mobile Safari/537.36 EdgA/120.0.2210.115",
	"Mozilla/5.0 (Linux; Android 11; moto g(60)) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (Linux; Android 12; Redmi Note 9 Pro) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (Linux; Android 13; 2201116SG) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (Windows NT 6.1; WOW64; Trident/7.0; rv:11.0) like Gecko",
	"Mozilla/5.0 (Windows NT 10.0; WOW64; Trident/7.0; .NET4.0C; .NET4.0E; .NET CLR 2.0.50727; .NET CLR 3.0.30729; .NET CLR 3.5.30729; rv:11.0) like Gecko",
	"Mozilla/5.0 (Windows NT 6.3; WOW64; Trident/7.0; MDDRJS; rv:11.0) like Gecko",
	"Mozilla/5.0 (compatible; MSIE 10.0; Windows NT 6.2; WOW64; Trident/6.0; Touch; MASPJS)",
	"Mozilla/5.0 (compatible; MSIE 9.0; Windows NT 6.1; WOW64; Trident/5.0)",
	"Mozilla/4.0 (compatible; MSIE 8.0; Windows NT 6.1; WOW64; Trident/4.0; SLCC2; .NET CLR 2.0.50727; .NET CLR 3.5.30729; .NET CLR 3.0.30729; Media Center PC 6.0; MS-RTC LM 8; InfoPath.3; .NET4.0C; .NET4.0E) chromeframe/8.0.552.224",
	"Mozilla/4.0 (compatible; MSIE 8.0; Windows NT 6.0; Trident/4.0; SLCC1; .NET CLR 2.0.50727; .NET CLR 1.1.4322; .NET CLR 3.5.30729; .NET CLR 3.0.30729)",
	"Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 6.0; SLCC1; .NET CLR 2.0.50727; Media Center PC 5.0; .NET CLR 3.0.04506)",
	"Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)",
	"Opera/9.80 (Windows NT 6.1; WOW64) Presto/2.12.388 Version/12.18",
}

func TestProductToken(t *testing.T) {
	for _, tc := range productTokenCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ProductToken(tc.ua); got != tc.want {
				t.Errorf("ProductToken(%q) = %q, want %q", tc.ua, got, tc.want)
			}
			checkProductToken(t, tc.ua)
		})
	}
}

// TestProductTokenPicksItsOwnGroup: a crawler whose User-Agent is a
// product token is judged by the group of exactly that name, not of a
// shorter one (RFC 9309 §2.2.1).
func TestProductTokenPicksItsOwnGroup(t *testing.T) {
	r := Parser{}.Parse([]byte("User-agent: GPTBot\nDisallow: /gpt\n\nUser-agent: GPTBot_\nDisallow: /under\n\nUser-agent: V\nDisallow: /v\n\nUser-agent: *\nDisallow: /all\n"))
	for _, tc := range []struct{ ua, path string }{
		{"GPTBot_", "/under"}, {"gptbot_", "/under"}, {"GPTBot", "/gpt"}, {"V", "/v"}, {"v", "/v"}, {"W", "/all"},
	} {
		if v := r.Check(ProductToken(tc.ua), tc.path); v.Allowed {
			t.Errorf("User-Agent %q may fetch %s; its own group disallows it", tc.ua, tc.path)
		}
	}
	if v := r.Check(ProductToken("GPTBot_"), "/gpt"); !v.Allowed {
		t.Errorf("User-Agent GPTBot_ is judged by GPTBot's group: %+v", v)
	}
}

func TestProductTokenOrdinaryBrowsers(t *testing.T) {
	for _, ua := range ordinaryBrowsers {
		if got := ProductToken(ua); got != "" {
			t.Errorf("ProductToken(%q) = %q, want \"\" (an ordinary browser)", ua, got)
		}
	}
}

// TestProductTokenCrawlerData measures the share of the real crawler UAs in
// crawler-user-agents.json that give their recorded token, and holds
// README.md to the figures.
func TestProductTokenCrawlerData(t *testing.T) {
	entries := readUserAgents(t, crawlerUserAgents)
	var documented, documentedOK, allOK int
	for _, e := range entries {
		if e.Token == "" {
			t.Fatalf("entry %q has no token", e.UserAgent)
		}
		got := ProductToken(e.UserAgent)
		ok := equalFoldASCII(got, e.Token)
		if ok {
			allOK++
		} else {
			t.Logf("miss (%s): %q: want %q, got %q", e.Confidence, e.UserAgent, e.Token, got)
		}
		if e.Confidence == "documented" {
			documented++
			if ok {
				documentedOK++
			}
		}
	}
	if documented == 0 {
		t.Fatal("no documented entries in the data file")
	}
	percent := func(n, of int) string { return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of)) }
	requireREADME(t, fmt.Sprintf("On the %s real headers of `robots/testdata/%s` the rule finds the expected token for %s of the operator-documented ones (%s/%s) and %s of all (%s/%s)",
		thousands(len(entries)), crawlerUserAgents,
		percent(documentedOK, documented), thousands(documentedOK), thousands(documented),
		percent(allOK, len(entries)), thousands(allOK), thousands(len(entries))))
}

// TestProductTokenAmbiguousData checks the invariants on the UAs whose token is
// unclear; no particular answer is expected of them.
func TestProductTokenAmbiguousData(t *testing.T) {
	entries := readUserAgents(t, ambiguousUserAgents)
	for _, e := range entries {
		checkProductToken(t, e.UserAgent)
	}
}

func FuzzProductToken(f *testing.F) {
	for _, tc := range productTokenCases {
		f.Add(tc.ua)
	}
	for _, ua := range ordinaryBrowsers {
		f.Add(ua)
	}
	// The real headers make good seeds.
	for _, name := range []string{crawlerUserAgents, ambiguousUserAgents} {
		for _, e := range readUserAgents(f, name) {
			f.Add(e.UserAgent)
		}
	}
	f.Fuzz(func(t *testing.T, ua string) {
		checkProductToken(t, ua)
		if IsProductToken(ua) && ProductToken(ua) != ua {
			t.Fatalf("ProductToken(%q) = %q; a product token is itself", ua, ProductToken(ua))
		}
	})
}

func BenchmarkProductToken(b *testing.B) {
	b.Run("crawler-data", func(b *testing.B) {
		entries := readUserAgents(b, crawlerUserAgents)
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			ProductToken(entries[n%len(entries)].UserAgent)
			n++
		}
	})
	for _, bc := range []struct{ name, ua string }{
		{"chrome", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"},
		{"googlebot-smartphone", "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/41.0.2272.96 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"},
		{"curl", "curl/8.5.0"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ProductToken(bc.ua)
			}
		})
	}
}

// checkProductToken checks what holds for every User-Agent: the result is a
// substring of it, made of HTTP token characters other than "*" (so the
// matcher's normalisation of a User-agent line keeps it whole), and it is its
// own token.
func checkProductToken(t *testing.T, ua string) {
	t.Helper()
	got := ProductToken(ua)
	if got == "" {
		return
	}
	if !strings.Contains(ua, got) {
		t.Fatalf("ProductToken(%q) = %q, not a substring", ua, got)
	}
	for i := 0; i < len(got); i++ {
		if !isTokenCharNotStar(got[i]) {
			t.Fatalf("ProductToken(%q) = %q, byte %q is not an HTTP token character", ua, got, got[i])
		}
	}
	if again := ProductToken(got); again != got {
		t.Fatalf("ProductToken(%q) = %q, but ProductToken(%q) = %q", ua, got, got, again)
	}
}

// isTokenCharNotStar reports whether b is an RFC 9110 tchar other than "*".
func isTokenCharNotStar(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		strings.IndexByte("!#$%&'+-.^_`|~", b) >= 0
}

// The crawler data files under testdata/, described in the README beside
// them: headers with their expected token, and headers whose token is unclear.
const (
	crawlerUserAgents   = "useragents/crawler-user-agents.json"
	ambiguousUserAgents = "useragents/crawler-user-agents-ambiguous.json"
)

// userAgentEntry is one record of the crawler data files; Token and
// Confidence are empty in the ambiguous file.
type userAgentEntry struct {
	UserAgent  string `json:"user_agent"`
	Token      string `json:"token"`
	Confidence string `json:"confidence"`
}

// readUserAgents reads a crawler data file from testdata/.
func readUserAgents(tb testing.TB, name string) []userAgentEntry {
	tb.Helper()
	var entries []userAgentEntry
	if err := json.Unmarshal(readTestdata(tb, name), &entries); err != nil {
		tb.Fatalf("decoding %s: %v", name, err)
	}
	if len(entries) == 0 {
		tb.Fatalf("%s has no entries", name)
	}
	return entries
}
