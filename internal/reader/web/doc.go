// Package web is the reader's web pages (docs/web.md): the archive in a
// browser, server-rendered, no script. They read the archive through the
// reader's one read interface (reader.Archive), the read API's queries,
// so every limit of the API holds for them; each page builds what its
// template shows from the archive's answers in its handler, and every
// error is answered by reader.OutcomeOf, as a page with the status and
// Retry-After the API gives the same condition. The reader binary mounts
// them under DefaultBase (reader.Deps.Pages).
//
// One concept per file:
//
//   - The server (server.go): routes, the security headers of every
//     answer, the error page (Fail).
//   - The pages (pages.go): each reads its parameters (params.go), asks
//     the archive, and builds its view.
//   - Templates (templates.go, templates/): the layout and one template a
//     page, with the few functions they call.
//   - Crawled content (render.go, budget.go, highlight.go): markdown
//     rendered within a budget and sanitised, html in a sandbox, the
//     query's words marked in snippets.
//   - Diffs (diffview.go): two versions' lines numbered, cut into hunks,
//     the changed words of a replaced line marked.
//   - Signing in (auth.go): the token taken from a form into a cookie.
//   - Reports (cspreport.go): the browser's Content-Security-Policy
//     violations, logged within a bound.
package web
