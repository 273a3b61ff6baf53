// Package console holds the web console's files (plain HTML, JS and CSS,
// no build step), embedded so that every front serving the API, a member
// (package server) or the gateway (cmd/latch), serves the same console.
package console

import (
	"embed"
	"path"
)

//go:embed *.html *.js *.css
var files embed.FS

// File returns a file of the console ("" is its page) and its content
// type; ok is false for a name the console does not have.
func File(name string) (body []byte, contentType string, ok bool) {
	if name == "" {
		name = "index.html"
	}
	b, err := files.ReadFile(path.Base(name))
	if err != nil {
		return nil, "", false
	}
	switch path.Ext(name) {
	case ".html":
		contentType = "text/html; charset=utf-8"
	case ".js":
		contentType = "text/javascript; charset=utf-8"
	case ".css":
		contentType = "text/css; charset=utf-8"
	}
	return b, contentType, true
}
