// Package kit holds what every service's domain is built with the same way.
package kit

// Decorators are the per-method decorators of a domain's service S, one per concern;
// a nil one is left out.
type Decorators[S any] struct {
	Audit   func(S) S // records each state-changing call in the audit trail
	Log     func(S) S // logs each change of state once it is done
	Metrics func(S) S // counts the domain outcomes from the results
}

// Decorate wraps svc in d in the platform's one order, innermost first: Audit, then Log,
// then Metrics. Auditing sits next to the service, so it records what the service
// answered; the outer decorators see the call as the client made it, and a refusal is
// audited, logged and counted alike in every service. A domain's constructor calls it
// with its own decorators, which nothing else can reach, so an app cannot wrap a
// service in another order.
func Decorate[S any](svc S, d Decorators[S]) S {
	for _, wrap := range []func(S) S{d.Audit, d.Log, d.Metrics} {
		if wrap != nil {
			svc = wrap(svc)
		}
	}
	return svc
}
