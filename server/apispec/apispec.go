// Package apispec holds the HTTP API's OpenAPI document (openapi.json),
// embedded so that every front serving the API, a member (package server)
// or the gateway (cmd/latch), serves the same document.
package apispec

import _ "embed"

// Document is the API's OpenAPI document.
//
//go:embed openapi.json
var Document []byte
