package embed

// What the black-box tests (package embed_test) drive directly: the rules of a
// generate-session body that need no stored state, and the request limits.

// ValidateGenerateSession checks the rules of a generate-session body that need no
// stored state; every failure is an errs.Invalid error.
func ValidateGenerateSession(req GenerateSessionRequest) error {
	_, err := validateStatic(&req)
	return err
}

// Check is Limits.check.
func (l Limits) Check(req *GenerateSessionRequest) error { return l.check(req) }

// NormalizeMembers is normalizeMembers: a membership POST's external ids checked.
func NormalizeMembers(in GroupMembersInput) ([]string, error) { return normalizeMembers(in) }

// LoggingMiddleware is the logging decorator NewService applies (Options.Logger), alone.
var LoggingMiddleware = loggingMiddleware
