package serve

import (
	_ "embed"
	"net/http"
)

// chatPage is the chat page at /: one static file, no build step; it
// streams from /v1/chat/completions and shows tok/s.
//
//go:embed page/index.html
var chatPage []byte

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	w.Write(chatPage)
}
