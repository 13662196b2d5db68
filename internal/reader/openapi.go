package reader

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPIDocument describes every endpoint; TestOpenAPI checks it against
// the running service (each route documented, each documented answer
// matching its schema).
//
//go:embed openapi.json
var openAPIDocument []byte

func (s *Server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/json", openAPIDocument)
}
