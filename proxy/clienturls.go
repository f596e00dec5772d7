package proxy

import (
	"net"
	"strconv"
)

// ClientURLs is how clients name the proxy listening on addr, as
// http://host:port. here is the listener's own address or, when it listens
// on every address (0.0.0.0, ::), 127.0.0.1 for a client on this machine;
// then elsewhere is an example for clients on other machines, with this
// machine's first address (from interfaces, IPv4 first) that is neither
// loopback nor link-local, "" if it has none. Behind NAT or a container's
// published port, clients use yet another address.
func ClientURLs(addr net.Addr, interfaces func() ([]net.Addr, error)) (here, elsewhere string) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return "http://" + addr.String(), ""
	}
	port := strconv.Itoa(tcp.Port)
	if !tcp.IP.IsUnspecified() {
		return "http://" + net.JoinHostPort(tcp.IP.String(), port), ""
	}
	// Go listens on :: for IPv4 too: 127.0.0.1 reaches either.
	here = "http://" + net.JoinHostPort("127.0.0.1", port)
	addrs, err := interfaces()
	if err != nil {
		return here, ""
	}
	var v6 string
	for _, a := range addrs {
		ipnet, ok := a.(*net.IPNet)
		if !ok || ipnet.IP.IsLoopback() || ipnet.IP.IsLinkLocalUnicast() || !ipnet.IP.IsGlobalUnicast() {
			continue
		}
		if ipnet.IP.To4() != nil {
			return here, "http://" + net.JoinHostPort(ipnet.IP.String(), port)
		}
		if v6 == "" && tcp.IP.To4() == nil { // 0.0.0.0 takes no IPv6 client
			v6 = "http://" + net.JoinHostPort(ipnet.IP.String(), port)
		}
	}
	return here, v6
}
