package embedauth

import "github.com/prometheus/client_golang/prometheus"

// Revocation check results: the label values of gateway_embed_revocation_checks_total.
const (
	checkOK      = "ok"      // neither the session nor its signing key is revoked
	checkRevoked = "revoked" // refused: revoked session or withdrawn key
	checkError   = "error"   // Redis did not answer: the request was refused with 503
)

// Instrument registers gateway_embed_revocation_checks_total{result} on reg and counts
// every revocation check in it. The check is what makes a revoke take effect on the
// next request; when it fails, embed traffic fails closed (503), and the alert on the
// error share tells the operator before customers do.
func (v *Verifier) Instrument(reg prometheus.Registerer) *Verifier {
	v.checks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_embed_revocation_checks_total",
		Help: "Embed token revocation checks (Redis) by result: ok, revoked, error (Redis unavailable; the request got 503)."}, []string{"result"})
	reg.MustRegister(v.checks)
	for _, r := range []string{checkOK, checkRevoked, checkError} {
		v.checks.WithLabelValues(r)
	}
	return v
}

func (v *Verifier) countCheck(result string) {
	if v.checks != nil {
		v.checks.WithLabelValues(result).Inc()
	}
}
