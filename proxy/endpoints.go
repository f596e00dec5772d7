package proxy

import (
	"fmt"
	"net/http"

	"robotsgate/proxy/signing"
)

// endpoints serves requests addressed to the proxy itself rather than
// through it.
func (s *Server) newEndpoints() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ca.pem", func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Issuer == nil {
			http.Error(w, "HTTPS interception is off (ROBOTSGATE_MITM=false): there is no CA to trust.", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/x-pem-file")
		w.Header().Set("Content-Disposition", `attachment; filename="robotsgate-ca.pem"`)
		w.Write(s.opts.Issuer.CA().CertPEM())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		// Still "ok" while the fleet's Redis is away or refuses the
		// credentials: the instance serves alone, and a restart would not
		// bring Redis back (with refused credentials it would not even
		// start). The second line says which.
		fmt.Fprintln(w, "ok")
		if s.opts.Fleet != nil {
			fmt.Fprintln(w, s.opts.Fleet.HealthDetail())
		}
		for _, state := range s.opts.Files {
			if st := state(); st.Path != "" {
				fmt.Fprintln(w, st)
			}
		}
	})
	mux.Handle("GET /metrics", s.metrics.Handler())
	mux.HandleFunc("GET "+signing.DirectoryPath, s.serveKeyDirectory)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "robotsgate %s: a forward proxy that makes crawlers obey robots.txt (RFC 9309).\n\n", s.opts.Version)
		fmt.Fprintf(w, "Point a crawler at it with HTTP_PROXY=http://%s and HTTPS_PROXY=http://%s.\n", r.Host, r.Host)
		if s.opts.Issuer != nil {
			fmt.Fprintf(w, "HTTPS is intercepted: make the crawler trust the CA at http://%s/ca.pem.\n", r.Host)
		}
		fmt.Fprintln(w, "\n/ca.pem   the CA certificate\n/healthz  liveness\n/metrics  Prometheus metrics\n"+
			signing.DirectoryPath+"  the signing keys (Web Bot Auth) of the identity whose Signature-Agent names this host")
	})
	return mux
}
