package robots

import "strings"

// ProductToken returns the robots.txt product token that a site owner would
// write in a "User-agent:" line for the client that sent the User-Agent header
// userAgent. It returns "" when there is no product token: only the "*" group
// of a robots.txt applies to the client then. Empty and blank headers and the
// headers of ordinary browsers (Chrome, Firefox, Safari, Edge, MSIE, …) give "".
//
// The token is a substring of userAgent, spelled as there; the matcher compares
// it case-insensitively. A header that is itself one product token of RFC
// 9309 §2.2.1 (letters, "-" and "_") is the token, unchanged: "V", "_Y",
// "GPTBot_", "cQyS-", as Google's matcher reads them. Otherwise the token is
// found as described below; it starts with a letter or digit and holds only
// letters, digits, "-", "_", "." and "!", all HTTP token characters, so the
// matcher's normalisation of a "User-agent:" value keeps it whole. For every
// token t, ProductToken(t) == t.
//
// # Reading the header
//
// The header is split into chunks at white space and at "(", ")", "[", "]",
// ";", ",", "{", "}", "<", ">" and '"'. Parentheses and brackets enclose
// comments, and ";" and "," separate the items of a comment (or of the text
// outside comments). A chunk names something only when, after a leading "+"
// (written for a space: "Mozilla/5.0+(compatible;+PiplBot)") or "'", it is a
// name up to its end or up to a "/" that starts a version: "http://…",
// "bot@example.com" and "rv:11.0" name nothing. Trailing ".", "-", "_" are
// dropped from a name ("Nitro-" is "Nitro"). These names are never the token:
//   - versions: the name starts with a digit, or "v" and a digit, and has no
//     run of three letters ("1.0", "v2", "5X"; "360Spider" is a name);
//   - host names: the name has a dot and no "_" after its last dot ("yacy.net",
//     "UP.Browser"; "Mail.RU_Bot" and "archive.org_bot" are names);
//   - exclamations: the name ends in "!" ("Yahoo!" in "Yahoo! Slurp");
//   - the words of ordinary browser headers, such as "Mozilla", "AppleWebKit",
//     "Chrome", "Windows", "x64" (see isGeneric), and "bot" and "robot";
//   - "crawler" or "spider" after another word of the same item: they
//     describe that word, which is also what the matcher keeps of a multi-word
//     name ("SISTRIX Crawler" gives "SISTRIX"; "(compatible; Spider)", "Spider");
//   - single letters, and language tags without a version in a comment
//     ("U", "en", "en-US");
//   - the words "compatible", "like", "with", "via" and "following", and the
//     chunk after one of the last four: it names another crawler ("treat like
//     Googlebot", "compatible with Googlebot", "like FeedFetcher-Google").
//
// # Choosing the token
//
// The head is the first of the remaining names outside comments. The comment
// right after the
// head describes the head, and so do words without a version after a head with
// one ("Gwene/1.0 (…) Googlebot"): names there are subordinate. The token is
// the first name, subordinate names left out, of the first of these classes
// that has one:
//
//  1. the name that starts the item after the word "compatible"
//     ("(compatible; bingbot/2.0; +http://…)",
//     "(KHTML, like Gecko; compatible; GPTBot/1.0; …)", "compatible ZyBorg/1.0"),
//     when it has a version or is the only word of its item, a version aside;
//  2. a name that looks like a crawler's because it contains "bot", "crawl",
//     "spider" or "fetch", anywhere: "Googlebot" after the browser products of a
//     smartphone header, "Bytespider" in "… Safari/537.36; Bytespider";
//  3. the head: "curl" in "curl/8.5.0", "AdsBot-Google (+http://…)";
//  4. in a comment, the name that starts an item and has a version, or is the
//     only word of its item and has a lower-case letter (device codes such as
//     "SLCC2" or "SM-G991B" have none): "Storebot-Google/1.0" or "ips-agent" in
//     a platform comment; and the name that starts a longer item after
//     "compatible" ("Yahoo! Slurp China" gives "Slurp").
func ProductToken(userAgent string) string {
	if IsProductToken(userAgent) {
		return userAgent
	}
	s := uaScanner{ua: userAgent}
	s.scan()
	if s.best.class == 0 {
		return ""
	}
	return userAgent[s.best.start:s.best.end]
}

// IsProductToken reports whether s is one product token as RFC 9309
// §2.2.1 defines it: one or more letters, "-" and "_".
func IsProductToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLetter(c) && c != '-' && c != '_' {
			return false
		}
	}
	return s != ""
}

// Candidate classes, best first; 0 means no candidate.
const (
	classCompatible = 1 + iota
	classCrawler
	classHead
	classComment
)

// crawlerMarks are parts of a name that make it look like a crawler's.
var crawlerMarks = [...]string{"bot", "crawl", "spider", "fetch"}

// candidate is a name at ua[start:end] of a class.
type candidate struct {
	start, end int
	class      int
}

// better reports whether c beats d: a better class, or the same class earlier.
func (c candidate) better(d candidate) bool {
	if d.class == 0 {
		return true
	}
	return c.class < d.class || (c.class == d.class && c.start < d.start)
}

// chunkKind says what a chunk of text between separators is.
type chunkKind uint8

const (
	chunkOther      chunkKind = iota // URL, e-mail, host, "key:value", punctuation, exclamation
	chunkVersion                     // "1.0", "v2"
	chunkName                        // a name, maybe ineligible (generic, "en", …)
	chunkCompatible                  // the word "compatible"
	chunkReference                   // "like", "with", "via", "following"
)

// chunk is one classified chunk; for names, ua[start:end] is the name.
type chunk struct {
	kind       chunkKind
	start, end int
	versioned  bool // the name is followed by "/"
	eligible   bool // the name may be a token
	lower      bool // an eligible name has a lower-case letter
	crawler    bool // an eligible name looks like a crawler's
	sub        bool // the name is subordinate to the head
}

// item collects the chunks of one ";"- or ","-separated item.
type item struct {
	compat          bool  // the item's words follow the word "compatible"
	compatAlone     bool  // "compatible" ended the item so far
	refNext         bool  // the next chunk is a reference to another crawler
	words           int   // names and versions counted (after "compatible")
	first           chunk // the first counted word
	secondIsVersion bool
}

// uaScanner walks a User-Agent once, left to right, and keeps the best candidate.
type uaScanner struct {
	ua    string
	best  candidate
	it    item
	depth int // parenthesis depth

	headSeen      bool
	headVersioned bool
	headJustEnded bool // nothing but spaces since the head
	inHeadComment bool // inside the comment that follows the head
}

// offer keeps ua[start:end] of class if it beats the best candidate so far.
func (s *uaScanner) offer(start, end, class int) {
	c := candidate{start: start, end: end, class: class}
	if c.better(s.best) {
		s.best = c
	}
}

// scan splits the header into chunks and items, tracking comment depth and the
// head's comment.
func (s *uaScanner) scan() {
	ua := s.ua
	for i := 0; i < len(ua); {
		c := ua[i]
		switch {
		case c == '(' || c == '[':
			s.endItem(false)
			if s.depth == 0 && s.headJustEnded {
				s.inHeadComment = true
			}
			s.depth++
			s.headJustEnded = false
		case c == ')' || c == ']':
			s.endItem(false)
			if s.depth > 0 {
				s.depth--
			}
			if s.depth == 0 {
				s.inHeadComment = false
			}
			s.headJustEnded = false
		case c == ';' || c == ',':
			s.endItem(true)
			s.headJustEnded = false
		case isSeparator(c):
			// Spaces keep headJustEnded: "Name/1.0 (comment)".
		default:
			j := i + 1
			for j < len(ua) && !isSeparator(ua[j]) {
				j++
			}
			s.headJustEnded = false
			s.chunk(i, j)
			i = j
			continue
		}
		i++
	}
	s.endItem(false)
}

// chunk handles the chunk ua[i:j].
func (s *uaScanner) chunk(i, j int) {
	c := s.classify(i, j)
	it := &s.it
	if c.kind == chunkCompatible {
		*it = item{compat: true, compatAlone: true}
		return
	}
	it.compatAlone = false
	if it.refNext {
		it.refNext = false
		return
	}
	switch c.kind {
	case chunkReference:
		it.refNext = true
		return
	case chunkOther:
		return
	case chunkVersion:
		it.words++
		if it.words == 2 {
			it.secondIsVersion = true
		}
		return
	}

	// "SISTRIX Crawler", "Screaming Frog SEO Spider/5.1": the word describes the
	// name before it, which the matcher keeps when it cuts a multi-word name.
	if it.words > 0 && isDescriptor(s.ua[c.start:c.end]) {
		c.eligible = false
	}
	if c.eligible {
		isHead := false
		if s.depth == 0 {
			if !s.headSeen {
				isHead = true
				s.headSeen = true
				s.headVersioned = c.versioned
			} else if s.headVersioned && !c.versioned {
				c.sub = true
			}
		} else if s.inHeadComment {
			c.sub = true
		}
		if c.crawler && !c.sub {
			s.offer(c.start, c.end, classCrawler)
		}
		if isHead {
			s.offer(c.start, c.end, classHead)
			s.headJustEnded = true
		}
	}
	it.words++
	if it.words == 1 {
		it.first = c
	}
}

// endItem weighs the item that ends here and starts the next one. A
// "compatible" that ended the item carries over to the next item when
// sameComment, that is, when the items are separated by ";" or ",".
func (s *uaScanner) endItem(sameComment bool) {
	it := &s.it
	if f := it.first; it.words > 0 && f.kind == chunkName && f.eligible && !f.sub {
		switch {
		case it.compat && (f.versioned || it.words == 1 || (it.words == 2 && it.secondIsVersion)):
			s.offer(f.start, f.end, classCompatible)
		case it.compat:
			s.offer(f.start, f.end, classComment)
		case s.depth > 0 && (f.versioned || it.words == 1 && f.lower):
			s.offer(f.start, f.end, classComment)
		}
	}
	*it = item{compat: sameComment && it.compat && it.compatAlone}
}

// classify tells what ua[i:j] is.
func (s *uaScanner) classify(i, j int) chunk {
	ua := s.ua
	for i < j && (ua[i] == '+' || ua[i] == '\'') {
		i++
	}
	if i == j || !isAlnum(ua[i]) {
		return chunk{kind: chunkOther}
	}
	k, dotted := i+1, false
	for ; k < j && isNameChar(ua[k]); k++ {
		dotted = dotted || ua[k] == '.'
	}
	versioned := false
	if k < j {
		if ua[k] != '/' {
			return chunk{kind: chunkOther} // URL scheme, e-mail, "key:value", …
		}
		versioned = true
	}
	end := k
	exclamation := false
	for end > i+1 && (ua[end-1] == '.' || ua[end-1] == '-' || ua[end-1] == '_' || ua[end-1] == '!') {
		exclamation = exclamation || ua[end-1] == '!'
		end--
	}
	name := ua[i:end]
	switch {
	case exclamation: // "Yahoo!"
		return chunk{kind: chunkOther}
	case isVersion(name):
		return chunk{kind: chunkVersion}
	case dotted && isHost(name):
		return chunk{kind: chunkOther}
	case equalFoldASCII(name, "compatible"):
		if versioned {
			return chunk{kind: chunkOther}
		}
		return chunk{kind: chunkCompatible}
	case equalFoldASCII(name, "like"), equalFoldASCII(name, "with"), equalFoldASCII(name, "via"), equalFoldASCII(name, "following"):
		if versioned {
			return chunk{kind: chunkOther}
		}
		return chunk{kind: chunkReference}
	}
	c := chunk{kind: chunkName, start: i, end: end, versioned: versioned}
	// Language tags appear bare in comments ("(X11; U; Linux; en-US)"), while
	// "um-LN/1.0" is a product.
	c.eligible = len(name) > 1 && !isGeneric(name) && (versioned || s.depth == 0 || !isLanguageTag(name))
	if !c.eligible {
		return c
	}
	for n := 0; n < len(name); n++ {
		if isLower(name[n]) {
			c.lower = true
			break
		}
	}
	for _, m := range crawlerMarks {
		if containsFoldASCII(name, m) {
			c.crawler = true
			break
		}
	}
	return c
}

// Byte classes for the scanner.
const (
	byteSeparator = 1 << iota // separates chunks
	byteName                  // may be part of a name
)

// byteClass classifies every byte value; it is built once and only read.
var byteClass = func() (t [256]uint8) {
	for b := 0; b <= ' '; b++ {
		t[b] = byteSeparator // white space and control bytes
	}
	// Punctuation that delimits products, comments and items.
	for _, b := range []byte("()[];,{}<>\"\x7f") {
		t[b] = byteSeparator
	}
	for b := range len(t) {
		if isAlnum(byte(b)) {
			t[b] = byteName
		}
	}
	// All name bytes are HTTP token characters, so a name survives the
	// matcher's normalisation whole.
	for _, b := range []byte("-_.!") {
		t[b] = byteName
	}
	return t
}()

func isSeparator(b byte) bool { return byteClass[b]&byteSeparator != 0 }
func isNameChar(b byte) bool  { return byteClass[b]&byteName != 0 }

// isVersion reports whether name is a version: it starts with a digit, or "v"
// and a digit, and has no run of three letters.
func isVersion(name string) bool {
	d := name
	if len(d) > 1 && (d[0] == 'v' || d[0] == 'V') {
		d = d[1:]
	}
	if !isDigit(d[0]) {
		return false
	}
	run := 0
	for n := 0; n < len(name); n++ {
		if !isLetter(name[n]) {
			run = 0
			continue
		}
		if run++; run == 3 {
			return false
		}
	}
	return true
}

// isHost reports whether name is a host name (or a dotted version such as
// "binlar_2.6.3"): it has a dot and no "_" after its last dot.
func isHost(name string) bool {
	dot := strings.LastIndexByte(name, '.')
	return dot >= 0 && strings.IndexByte(name[dot+1:], '_') < 0
}

// isLanguageTag reports whether name looks like "en" or "en-US".
func isLanguageTag(name string) bool {
	switch len(name) {
	case 2:
		return isLower(name[0]) && isLower(name[1])
	case 5:
		return isLetter(name[0]) && isLetter(name[1]) && name[2] == '-' && isLetter(name[3]) && isLetter(name[4])
	}
	return false
}

// maxGenericLen is the length of the longest generic word; longer names are
// not looked up.
const maxGenericLen = len("samsungbrowser")

// isGeneric reports whether name, ignoring case, is a word of ordinary browser
// User-Agents (browsers, engines, operating systems, devices, CPUs) or "bot" or
// "robot", which describe a client rather than name it. None of them is a
// crawler's token.
func isGeneric(name string) bool {
	if len(name) > maxGenericLen {
		return false
	}
	var buf [maxGenericLen]byte
	switch string(appendLowerASCII(buf[:0], name)) {
	case // Browsers and engines.
		"mozilla", "applewebkit", "webkit", "khtml", "gecko", "chrome",
		"chromium", "headlesschrome", "chromeframe", "crios", "safari", "mobile",
		"version", "firefox", "fxios", "edg", "edge", "edga", "edgios", "opr",
		"opera", "presto", "trident", "msie", "iemobile", "samsungbrowser",
		"yabrowser", "ucbrowser", "vivaldi", "electron", "browser", "renderer",
		// Operating systems, devices and CPUs.
		"windows", "nt", "win64", "win32", "wow64", "x64", "x86_64", "amd64",
		"i686", "i386", "arm64", "aarch64", "linux", "android", "x11", "ubuntu",
		"fedora", "cros", "macintosh", "mac", "macos", "os", "iphone", "ipad",
		"ipod", "cpu", "intel", "touch", "build", "tablet",
		// Descriptions, not names.
		"bot", "robot":
		return true
	}
	return false
}

// isDescriptor reports whether name is a word that describes the name before
// it rather than naming a client.
func isDescriptor(name string) bool {
	return equalFoldASCII(name, "crawler") || equalFoldASCII(name, "spider")
}
