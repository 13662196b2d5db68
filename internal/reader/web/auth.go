package web

import (
	"net/http"
	"strings"
)

// TokenChecker checks a bearer token: the read API's tokens
// (verify.Tokens). Check takes the header value, "Bearer <token>" or the
// token alone, and returns nil when it is one of the tokens.
type TokenChecker interface {
	Check(authorization string) error
}

// Browsers cannot send an Authorization header on a link, so the pages
// take the read API's token once, from the sign-in form, and keep it in a
// cookie: HttpOnly (no script reads it, though none runs), SameSite=Strict
// (no other site's page sends it), scoped to the pages' path, and Secure
// whenever the page was reached over TLS (secureRequest). The token is
// never taken from a URL: an address stays in the browser's history and
// in every proxy's access log, so a sign-in link with ?token= is refused
// (400, the form) rather than followed, and the form posts the token in
// its body, as the sign-in forms of trusted services do. A sign-in posted
// from another site is refused (http.CrossOriginProtection), so no page
// elsewhere signs a reader in with a token of its choosing.
// A request may also carry the token as the API's do, in Authorization.
// The stylesheet and the CSP reports need no token: the login page uses
// the one, and browsers post the other without credentials.

// cookieName is the cookie holding the token.
const cookieName = "crawlhouse_reader_token"

// maxToken bounds a token taken from a form, a query or a cookie.
const maxToken = 512

// authorized reports whether r carries one of the tokens; always true
// without a TokenChecker.
func (s *Server) authorized(r *http.Request) bool {
	if s.tokens == nil {
		return true
	}
	if h := r.Header.Get("Authorization"); h != "" {
		return len(h) <= maxToken+16 && s.tokens.Check(h) == nil
	}
	c, err := r.Cookie(cookieName)
	return err == nil && len(c.Value) <= maxToken && s.tokens.Check(c.Value) == nil
}

// requireToken serves next to authorized requests and the login page, 401,
// to the others.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.authorized(r) {
			next.ServeHTTP(w, r)
			return
		}
		s.showLogin(w, r, http.StatusUnauthorized, "", r.URL.RequestURI())
	})
}

// loginPage is the data of the login template.
type loginPage struct {
	Message string
	// Next is where a successful login goes: a path of the pages.
	Next string
}

// showLogin writes the sign-in form. Its referrer policy is same-origin,
// not the pages' no-referrer, so that the browser's post of the form
// carries the page's Origin (secureRequest); the page holds nothing
// crawled.
func (s *Server) showLogin(w http.ResponseWriter, r *http.Request, status int, message, next string) {
	w.Header().Set("Referrer-Policy", loginReferrerPolicy)
	s.write(w, r, status, "login", loginPage{Message: message, Next: s.safeNext(next)})
}

const loginReferrerPolicy = "same-origin"

// safeNext is next when it is a path of the pages, else the jobs page: a
// login never sends the reader to another site.
func (s *Server) safeNext(next string) string {
	if strings.HasPrefix(next, s.base+"/") && !strings.HasPrefix(next, "//") && !strings.Contains(next, `\`) &&
		!strings.HasPrefix(next, s.base+"/login") && len(next) <= maxLinkBytes {
		return next
	}
	return s.base + "/jobs"
}

// login shows the form (GET) or takes the token it posts (POST): it sets
// the cookie and sends the reader on to next. A token in the URL is
// refused, whatever the method.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("token") {
		s.showLogin(w, r, http.StatusBadRequest, "A token is never taken from the address (it would stay in the browser's history and in proxies' logs): paste it here.", r.URL.Query().Get("next"))
		return
	}
	if r.Method != http.MethodPost {
		s.showLogin(w, r, http.StatusOK, "", r.URL.Query().Get("next"))
		return
	}
	if err := s.sameOrigin.Check(r); err != nil {
		s.showLogin(w, r, http.StatusForbidden, "A sign-in from another site is refused.", "")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	if err := r.ParseForm(); err != nil {
		s.showLogin(w, r, http.StatusBadRequest, "The form could not be read.", "")
		return
	}
	token, next := strings.TrimSpace(r.PostForm.Get("token")), r.PostForm.Get("next")
	if token == "" {
		s.showLogin(w, r, http.StatusOK, "", next)
		return
	}
	if s.tokens != nil && (len(token) > maxToken || s.tokens.Check(token) != nil) {
		s.showLogin(w, r, http.StatusUnauthorized, "That token is not one of the reader's tokens.", next)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: token, Path: s.base + "/",
		HttpOnly: true, Secure: secureRequest(r), SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, s.safeNext(next), http.StatusSeeOther)
}

// maxLoginForm bounds the sign-in form's body: a token and a path.
const maxLoginForm = maxToken + maxLinkBytes + 1024

// secureRequest reports whether the browser reached the pages over TLS:
// on a TLS connection, or through a proxy that terminated TLS and said so
// (X-Forwarded-Proto: https, or Forwarded: proto=https), or as the browser
// itself says of the page that posted the form (an https Origin; the login
// page's referrer policy lets it send one). These headers are believed
// from any client, with no list of trusted proxies: each can only make
// the cookie Secure, which no one gains by forging (a browser would then
// keep it off plain http, from the one who forged it).
func secureRequest(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	if strings.EqualFold(strings.TrimSpace(proto), "https") {
		return true
	}
	for _, elem := range strings.Split(r.Header.Get("Forwarded"), ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(strings.Split(elem, ",")[0]), "=")
		if strings.EqualFold(k, "proto") && strings.EqualFold(strings.Trim(v, `"`), "https") {
			return true
		}
	}
	return strings.HasPrefix(strings.ToLower(r.Header.Get("Origin")), "https://")
}
