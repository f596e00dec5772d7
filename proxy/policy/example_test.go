package policy_test

import (
	"fmt"

	"robotsgate/proxy/policy"
	"robotsgate/robots"
)

func ExampleLoad() {
	p, err := policy.Load("testdata/example.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, note := range p.Notes() {
		fmt.Println("note:", note)
	}

	// acme's sandbox, before any robots.txt fetch.
	m := p.Match("acme", "acme", "example.com")
	fmt.Println(m.Destination())

	// An exception for the archiver, where robots.txt disallows.
	robotsTxt := robots.Parser{}.Parse([]byte("User-agent: *\nDisallow: /reports/\n"))
	v := robotsTxt.CheckReadings("archiver", "/reports/q3.html")
	m = p.Match("archiver", "archiver", "www.example.com")
	allowed, f := m.Judge("/reports/q3.html", v)
	fmt.Println(allowed, f)

	// A site's rule, for every crawler.
	allowed, f = m.Judge("/shop/cart", robotsTxt.CheckReadings("archiver", "/shop/cart"))
	fmt.Println(allowed, f)
	// Output:
	// note: testdata/example.yaml line 23: the exceptions for domain:example.com are granted by token (ia_archiver): any anonymous client naming itself ia_archiver gets them; grant them to a user (users: [...]) to tie them to a credential
	// example.yaml line 8: destination: allow_sites: *.acme.example, acme-shop.example (acme may visit only the sites allow_sites names)
	// true example.yaml line 27: exception: allow: /reports/ (written permission from ops@example.com, 2026-10-01)
	// false example.yaml line 21: rule: Disallow: /shop/ (asked by mail to stay out of /shop/, 2026-10-01)
}
