package h1

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Limits bound a request head. Zero values take the defaults.
type Limits struct {
	// MaxRequestLine is the longest request line read at all (default 64 KiB): a longer
	// one is 414. The gateway answers a routed request whose target is longer than its
	// own, lower, limit with 414 too; an unknown path gets its 404 at any length.
	MaxRequestLine int
	// MaxHeaderBytes bounds the header fields together (default 16 KiB), MaxFieldBytes
	// one field line (default 8 KiB): 431 beyond either.
	MaxHeaderBytes int
	MaxFieldBytes  int
}

// MaxFields is the most header fields a request may have (431 beyond).
const MaxFields = 100

const (
	defaultMaxRequestLine = 64 << 10
	defaultMaxHeaderBytes = 16 << 10
	defaultMaxFieldBytes  = 8 << 10
)

func (l Limits) withDefaults() Limits {
	if l.MaxRequestLine <= 0 {
		l.MaxRequestLine = defaultMaxRequestLine
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = defaultMaxHeaderBytes
	}
	if l.MaxFieldBytes <= 0 {
		l.MaxFieldBytes = defaultMaxFieldBytes
	}
	return l
}

// Error is a request the server refuses before any handler sees it: its status and
// what was wrong, for the JSON error body.
type Error struct {
	Status int
	Msg    string
	// Limit names the Limits or ConnLimits field a refusal is over ("": none), for the
	// operator's log; Msg names its value.
	Limit string
}

func (e *Error) Error() string { return e.Msg }

func badRequest(msg string) *Error { return &Error{Status: http.StatusBadRequest, Msg: msg} }

// Errors of the head, each closing the connection after its answer.
var (
	errBareLF        = badRequest("a line of the request head ends in a bare LF; lines end in CRLF")
	errRequestLine   = badRequest("malformed request line: METHOD SP /path SP HTTP/1.1, with single spaces")
	errTarget        = badRequest("the request target must be a path starting with / of visible ASCII characters, without #")
	errPathEscape    = badRequest("the request path has an invalid percent-encoding")
	errFieldSyntax   = badRequest("malformed header field: name \":\" value, the name a token without surrounding whitespace")
	errObsFold       = badRequest("a header field is folded over several lines (obs-fold), which is not accepted")
	errFieldValue    = badRequest("a header field value holds a control character")
	errFieldValueTab = badRequest("a header field value begins or ends with a tab; only spaces may surround a value")
	errHost          = badRequest("the request needs exactly one Host field with a valid host name")
	errContentLength = badRequest("Content-Length must be given once, as digits only")
	errCLAndTE       = badRequest("a request with both Content-Length and Transfer-Encoding is refused as ambiguous")
	errTEDuplicate   = badRequest("Transfer-Encoding must be given once")
	errTEHTTP10      = badRequest("Transfer-Encoding is not accepted in an HTTP/1.0 request")
	errChunked       = badRequest("malformed chunked body: hex size (no extensions, no trailers) CRLF data CRLF, ended by 0 CRLF CRLF")
	// An unknown transfer coding and another version of HTTP are 400 rather than 501 and
	// 505: a 5xx says the platform failed, and counts toward its error rate and alerts.
	errTransferCoding  = badRequest("the only transfer coding accepted is chunked")
	errVersion         = badRequest("only HTTP/1.1 and HTTP/1.0 are served")
	errExpect          = &Error{Status: http.StatusExpectationFailed, Msg: "the only expectation met is 100-continue"}
	errTooManyFields   = &Error{Status: http.StatusRequestHeaderFieldsTooLarge, Msg: "a request has at most " + strconv.Itoa(MaxFields) + " header fields"}
	errRequestLineLong = &Error{Status: http.StatusRequestURITooLong, Msg: "the request line is too long"}
)

// headerTooLarge names what broke a header limit and the limit's value; field is the
// Limits field.
func headerTooLarge(what string, limit int, field string) *Error {
	return &Error{Status: http.StatusRequestHeaderFieldsTooLarge,
		Msg: what + " larger than the limit of " + strconv.Itoa(limit) + " bytes", Limit: field}
}

// parseHead parses a complete request head (every line ending in CRLF, the final empty
// line excluded) into r. scanHead has checked that no line ends in a bare LF.
func parseHead(head string, r *Request, lim *Limits) *Error {
	line, rest, _ := strings.Cut(head, "\r\n")
	if err := parseRequestLine(line, r); err != nil {
		return err
	}
	var haveHost, haveCL, haveTE bool
	n := 0
	for rest != "" {
		line, rest, _ = strings.Cut(rest, "\r\n")
		if n++; n > MaxFields {
			return errTooManyFields
		}
		if line[0] == ' ' || line[0] == '\t' {
			return errObsFold
		}
		colon := strings.IndexByte(line, ':')
		if colon <= 0 {
			return errFieldSyntax
		}
		name, value := line[:colon], trimOWS(line[colon+1:])
		drop := false
		for i := 0; i < len(name); i++ {
			c := name[i]
			if !isTokenChar(c) {
				return errFieldSyntax
			}
			// As nginx does (underscores_in_headers off): a name with an underscore is
			// dropped, since some servers read X_Foo and X-Foo as one field.
			drop = drop || c == '_'
		}
		for i := 0; i < len(value); i++ {
			if c := value[i]; (c < 0x20 && c != '\t') || c == 0x7f {
				return errFieldValue
			}
		}
		if value != "" && (value[0] == '\t' || value[len(value)-1] == '\t') {
			// A tab around a value is whitespace to net/http (the services trim it) but
			// part of the value to nginx: either reading is the wrong one for someone.
			return errFieldValueTab
		}
		if drop {
			continue
		}
		switch len(name) {
		case 4:
			if asciiEqualFold(name, "Host") {
				if haveHost || !validHost(value) {
					return errHost
				}
				haveHost, r.Host = true, value
			}
		case 6:
			if asciiEqualFold(name, "Expect") {
				if !asciiEqualFold(value, "100-continue") {
					return errExpect
				}
				r.Expect100 = true
			}
		case 10:
			if asciiEqualFold(name, "Connection") {
				tokens(value, func(t string) {
					if asciiEqualFold(t, "close") {
						r.Close = true
					}
					r.Connection = append(r.Connection, t)
				})
			}
		case 14:
			if asciiEqualFold(name, "Content-Length") {
				cl, ok := parseContentLength(value)
				if haveCL || !ok {
					return errContentLength
				}
				haveCL, r.ContentLength = true, cl
			}
		case 17:
			if asciiEqualFold(name, "Transfer-Encoding") {
				if haveTE {
					return errTEDuplicate
				}
				if !asciiEqualFold(value, "chunked") {
					return errTransferCoding
				}
				haveTE, r.ContentLength = true, -1
			}
		}
		r.Header.fields = append(r.Header.fields, Field{Name: name, Value: value})
	}
	switch {
	case haveCL && haveTE:
		return errCLAndTE
	case haveTE && r.HTTP10:
		return errTEHTTP10
	case !haveHost && !r.HTTP10:
		return errHost
	}
	if r.HTTP10 {
		r.Close = true
	}
	if r.ContentLength == 0 {
		r.Expect100 = false
	}
	return nil
}

func parseRequestLine(line string, r *Request) *Error {
	method, rest, ok := strings.Cut(line, " ")
	if !ok || method == "" {
		return errRequestLine
	}
	for i := 0; i < len(method); i++ {
		if !isTokenChar(method[i]) {
			return errRequestLine
		}
	}
	target, version, ok := strings.Cut(rest, " ")
	if !ok {
		return errRequestLine
	}
	switch version {
	case "HTTP/1.1":
	case "HTTP/1.0":
		r.HTTP10 = true
	default:
		if len(version) == 8 && strings.HasPrefix(version, "HTTP/") && isDigit(version[5]) && version[6] == '.' && isDigit(version[7]) {
			return errVersion
		}
		return errRequestLine
	}
	if target == "" || target[0] != '/' {
		return errTarget
	}
	escaped := false
	for i := 0; i < len(target); i++ {
		c := target[i]
		if c <= ' ' || c >= 0x7f || c == '#' {
			return errTarget
		}
		escaped = escaped || c == '%'
	}
	r.Method, r.Target = method, target
	path, query, _ := strings.Cut(target, "?")
	r.URL = URL{Path: path, RawQuery: query}
	if escaped {
		p, err := url.PathUnescape(path)
		if err != nil {
			return errPathEscape
		}
		r.URL.Path = p // which may hold an escaped control character: the handler's to refuse
	}
	return nil
}

// parseContentLength accepts 1 to 18 digits (nothing else: no sign, no list).
func parseContentLength(v string) (int64, bool) {
	if v == "" || len(v) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		if !isDigit(v[i]) {
			return 0, false
		}
		n = n*10 + int64(v[i]-'0')
	}
	return n, true
}

// validHost accepts a host name or address with an optional port: letters, digits and
// . - : [ ] only, no empty label and no "..". Anything else (user info, a path, spaces)
// is refused: the field is forwarded as X-Forwarded-Host.
func validHost(h string) bool {
	if h == "" || len(h) > 262 || h[0] == '.' || strings.Contains(h, "..") {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(isDigit(c) || ('a' <= lower(c) && lower(c) <= 'z') || c == '.' || c == '-' || c == ':' || c == '[' || c == ']') {
			return false
		}
	}
	return true
}

// trimOWS trims the spaces around a field value. A tab is kept, part of the value (as
// nginx reads it): "Transfer-Encoding:<TAB>chunked" is then an unknown coding, refused,
// rather than a framing that a reader who does not trim tabs would miss.
func trimOWS(s string) string {
	for len(s) > 0 && s[0] == ' ' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	return s
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isTokenChar reports a tchar of RFC 9110 5.6.2.
func isTokenChar(c byte) bool { return tokenChars[c] }

var tokenChars = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		t[c] = isDigit(b) || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
	}
	return t
}()
