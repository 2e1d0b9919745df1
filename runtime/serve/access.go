package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// access is the server's access control: API keys and CORS.
type access struct {
	keys    [][sha256.Size]byte // the keys' hashes: compared at one length, in constant time
	origins []string            // allowed CORS origins; "*" any
}

func newAccess(keys, origins []string) (*access, error) {
	a := &access{}
	for i, k := range keys {
		if k == "" || strings.TrimSpace(k) != k {
			return nil, fmt.Errorf("serve: API key %d is empty or has spaces around it", i+1)
		}
		a.keys = append(a.keys, sha256.Sum256([]byte(k)))
	}
	for _, o := range origins {
		if err := CheckOrigin(o); err != nil {
			return nil, err
		}
		a.origins = append(a.origins, strings.TrimSuffix(o, "/"))
	}
	return a, nil
}

// CheckOrigin accepts "*" or an origin as browsers send it:
// scheme://host[:port], no path.
func CheckOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("serve: CORS origin %q: expected * or scheme://host[:port] (such as https://example.com or http://localhost:3000)", o)
	}
	return nil
}

// corsMethods and corsHeaders are what a preflight allows: the API's
// methods, and the headers its clients send (the request's own
// Access-Control-Request-Headers too, as the openai client adds x-stainless-*).
const (
	corsMethods = "GET, POST, OPTIONS"
	corsHeaders = "Authorization, Content-Type, X-Api-Key"
	corsMaxAge  = "7200" // seconds; Chromium's cap
)

// wrap answers CORS preflights, adds the CORS headers to every response for
// an allowed origin, and checks the API key on every route but /health and
// the chat page (static; it asks for the key).
func (a *access) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if len(a.origins) > 0 && origin != "" {
			allowed := a.allowed(origin)
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				if !allowed {
					writeError(w, &apiError{Status: http.StatusForbidden, Type: "invalid_request_error", Code: strp("cors_origin_not_allowed"),
						Message: fmt.Sprintf("the origin %q may not call this server (--cors-origin)", origin)})
					return
				}
				a.corsHeaders(w.Header(), origin)
				hd := w.Header()
				hd.Set("Access-Control-Allow-Methods", corsMethods)
				allow := corsHeaders
				if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
					allow += ", " + req
				}
				hd.Set("Access-Control-Allow-Headers", allow)
				hd.Set("Access-Control-Max-Age", corsMaxAge)
				w.WriteHeader(http.StatusNoContent)
				return
			}
			if allowed {
				a.corsHeaders(w.Header(), origin)
			}
		}
		if len(a.keys) > 0 && !public(r) && !a.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="strata"`)
			writeError(w, &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: strp("invalid_api_key"),
				Message: "missing or incorrect API key: send it as the header Authorization: Bearer KEY (a key the server was started with, --api-key or --api-key-file)"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (a *access) allowed(origin string) bool {
	return slices.Contains(a.origins, "*") || slices.Contains(a.origins, origin)
}

func (a *access) corsHeaders(h http.Header, origin string) {
	if slices.Contains(a.origins, "*") {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
	}
	h.Set("Access-Control-Expose-Headers", "Retry-After")
}

// public says r needs no key: the health check, and the chat page's static
// files.
func public(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/health", "/", "/favicon.ico":
		return true
	}
	return false
}

// authorized checks the request's key (Authorization: Bearer KEY, or
// x-api-key: KEY) against every key, each in constant time.
func (a *access) authorized(r *http.Request) bool {
	key, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		key = r.Header.Get("X-Api-Key")
	}
	if key == "" {
		return false
	}
	got := sha256.Sum256([]byte(key))
	match := 0
	for _, k := range a.keys {
		match |= subtle.ConstantTimeCompare(got[:], k[:])
	}
	return match == 1
}

// bearer reads "Bearer TOKEN" (the scheme in any case).
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
