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
// take the read API's token once (the login form, or a link with ?token=
// such as `make run` prints) and keep it in a cookie: HttpOnly (no script
// reads it, though none runs), SameSite=Strict (no other site's page sends
// it), scoped to the pages' path, Secure when the request came over TLS.
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

func (s *Server) showLogin(w http.ResponseWriter, r *http.Request, status int, message, next string) {
	s.write(w, r, status, "login", loginPage{Message: message, Next: s.safeNext(next)})
}

// safeNext is next when it is a path of the pages, else the jobs page: a
// login never sends the reader to another site.
func (s *Server) safeNext(next string) string {
	if strings.HasPrefix(next, s.base+"/") && !strings.HasPrefix(next, "//") && !strings.Contains(next, `\`) &&
		!strings.HasPrefix(next, s.base+"/login") && len(next) <= maxLinkBytes {
		return next
	}
	return s.base + "/jobs"
}

// login takes a token from the form (POST) or the query (GET ?token=),
// sets the cookie and sends the reader on, without the token in the URL.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.showLogin(w, r, http.StatusBadRequest, "The form could not be read.", "")
		return
	}
	token, next := strings.TrimSpace(r.Form.Get("token")), r.Form.Get("next")
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
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, s.safeNext(next), http.StatusSeeOther)
}
