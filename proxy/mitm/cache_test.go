package mitm

import (
	"crypto/tls"
	"testing"
	"time"
)

func TestLeafCacheReplaceAndEvict(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	later := now.Add(time.Hour)
	c, err := newLeafCache(2)
	if err != nil {
		t.Fatal(err)
	}
	a1, a2, b, d := &tls.Certificate{}, &tls.Certificate{}, &tls.Certificate{}, &tls.Certificate{}

	c.put("a", a1, later)
	c.put("b", b, later)
	c.put("a", a2, later) // replaces a1 and makes a the most recent
	if c.len() != 2 {
		t.Fatalf("len %d after replacing an entry, want 2", c.len())
	}
	if got, ok := c.get("a", now); !ok || got != a2 {
		t.Errorf("get(a) = %p, %v; want the replacement %p", got, ok, a2)
	}
	c.put("d", d, later) // evicts b, the least recently used
	if _, ok := c.get("b", now); ok {
		t.Error("b survived although it was least recently used")
	}
	for host, want := range map[string]*tls.Certificate{"a": a2, "d": d} {
		if got, ok := c.get(host, now); !ok || got != want {
			t.Errorf("get(%s) = %p, %v; want %p", host, got, ok, want)
		}
	}

	if _, ok := c.get("a", later); ok {
		t.Error("served a leaf at its renewal time")
	}
	if c.len() != 1 {
		t.Errorf("len %d, want 1: an entry due for renewal is dropped when found", c.len())
	}
}
