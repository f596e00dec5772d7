package main

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestClientURLs(t *testing.T) {
	ifaces := func(cidrs ...string) func() ([]net.Addr, error) {
		return func() ([]net.Addr, error) {
			var addrs []net.Addr
			for _, c := range cidrs {
				ip, ipnet, err := net.ParseCIDR(c)
				if err != nil {
					t.Fatal(err)
				}
				ipnet.IP = ip
				addrs = append(addrs, ipnet)
			}
			return addrs, nil
		}
	}
	machine := ifaces("127.0.0.1/8", "::1/128", "fe80::1/64", "2001:db8::5/64", "192.0.2.7/24")
	tests := []struct {
		name            string
		addr            net.Addr
		interfaces      func() ([]net.Addr, error)
		here, elsewhere string
	}{
		{"loopback", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, machine, "http://127.0.0.1:8080", ""},
		{"one address", &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 3128}, machine, "http://192.0.2.7:3128", ""},
		{"IPv6 loopback", &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}, machine, "http://[::1]:8080", ""},
		{"every IPv4 address", &net.TCPAddr{IP: net.IPv4zero, Port: 8080}, machine, "http://127.0.0.1:8080", "http://192.0.2.7:8080"},
		{"every address", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, machine, "http://127.0.0.1:8080", "http://192.0.2.7:8080"},
		{"IPv6 only elsewhere", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, ifaces("127.0.0.1/8", "fe80::1/64", "2001:db8::5/64"),
			"http://127.0.0.1:8080", "http://[2001:db8::5]:8080"},
		{"IPv4 only, IPv6 only elsewhere", &net.TCPAddr{IP: net.IPv4zero, Port: 8080}, ifaces("127.0.0.1/8", "fe80::1/64", "2001:db8::5/64"),
			"http://127.0.0.1:8080", ""},
		{"loopback only", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, ifaces("127.0.0.1/8", "::1/128"), "http://127.0.0.1:8080", ""},
		{"interfaces unknown", &net.TCPAddr{IP: net.IPv4zero, Port: 8080},
			func() ([]net.Addr, error) { return nil, errors.New("no") }, "http://127.0.0.1:8080", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			here, elsewhere := clientURLs(tt.addr, tt.interfaces)
			if here != tt.here || elsewhere != tt.elsewhere {
				t.Errorf("clientURLs(%v) = %q, %q; want %q, %q", tt.addr, here, elsewhere, tt.here, tt.elsewhere)
			}
		})
	}
}

func TestPIDFile(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	path := filepath.Join(dir, "robotsgate.pid")
	if err := os.WriteFile(path, []byte("999999\n"), 0o644); err != nil { // a stale one
		t.Fatal(err)
	}
	remove, err := writePIDFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if want := strconv.Itoa(os.Getpid()) + "\n"; err != nil || string(got) != want {
		t.Fatalf("pid file holds %q (%v), want %q", got, err, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("pid file mode %v (%v), want -rw-r--r--", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d files, want the pid file alone: no temporary file left", len(entries))
	}
	remove(log)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file still there after remove: %v", err)
	}

	// Another process's pid file, written over this one's, stays.
	remove, err = writePIDFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	remove(log)
	if got, _ := os.ReadFile(path); string(got) != "1\n" {
		t.Errorf("remove took another process's pid file (now %q)", got)
	}

	missing := filepath.Join(dir, "no-such-dir", "robotsgate.pid")
	if _, err := writePIDFile(missing); err == nil || !strings.Contains(err.Error(), strconv.Quote(missing)) ||
		strings.Contains(err.Error(), ".robotsgate.pid.") {
		t.Errorf("writePIDFile in a missing directory: %v; want an error naming %q, not the temporary file", err, missing)
	}
}
