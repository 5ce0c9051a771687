package probe

import (
	"bufio"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
)

// quickCorpus are responses as servers send them, and odd ones.
var quickCorpus = []struct {
	name string
	resp string
	// quick: quickResponse reads the whole response (the stream ended
	// after it, or, with a Content-Length, not yet).
	quick bool
}{
	{name: "net/http", quick: true, resp: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain; charset=utf-8\r\nDate: Thu, 26 Nov 2026 16:00:00 GMT\r\nConnection: close\r\n\r\nok\n"},
	{name: "no reason", quick: true, resp: "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n"},
	{name: "server error", quick: true, resp: "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\n\r\ndown\n"},
	{name: "no content", quick: true, resp: "HTTP/1.1 204 No Content\r\nContent-Length: 99\r\n\r\n"},
	{name: "HTTP/1.0 to the end", quick: true, resp: "HTTP/1.0 200 OK\r\nServer: x\r\n\r\nhealthy"},
	{name: "redirect", quick: true, resp: "HTTP/1.1 302 Found\r\nlocation:  /healthz/ready \t\r\nLocation: /other\r\nContent-Length: 0\r\n\r\n"},
	{name: "absolute redirect", quick: true, resp: "HTTP/1.1 301 Moved Permanently\r\nLocation: http://10.0.0.1:8080/x\r\nContent-Length: 0\r\n\r\n"},
	{name: "empty location", quick: true, resp: "HTTP/1.1 301 Moved\r\nLocation:\r\nContent-Length: 0\r\n\r\n"},
	{name: "body over the limit", quick: true, resp: "HTTP/1.1 200 OK\r\nContent-Length: 20000\r\n\r\n" + strings.Repeat("x", maxBody)},
	{name: "leading zeros", quick: true, resp: "HTTP/1.1 200 OK\r\nContent-Length: 002\r\n\r\nok"},
	{name: "chunked", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nok\n\r\n0\r\n\r\n"},
	{name: "interim", resp: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	{name: "folded header", resp: "HTTP/1.1 200 OK\r\nX-A: 1\r\n  2\r\nContent-Length: 0\r\n\r\n"},
	{name: "bare newlines", resp: "HTTP/1.1 200 OK\nContent-Length: 0\n\n"},
	{name: "HTTP/2.0", resp: "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n"},
	{name: "bad status", resp: "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n"},
	{name: "long status", resp: "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n"},
	{name: "bad name", resp: "HTTP/1.1 200 OK\r\nX A: 1\r\nContent-Length: 0\r\n\r\n"},
	{name: "no colon", resp: "HTTP/1.1 200 OK\r\nnonsense\r\nContent-Length: 0\r\n\r\n"},
	{name: "bad length", resp: "HTTP/1.1 200 OK\r\nContent-Length: 1a\r\n\r\nok"},
	{name: "two lengths", resp: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!"},
	{name: "not ASCII", resp: "HTTP/1.1 200 OK\r\nX-A: caf\xc3\xa9\r\nContent-Length: 0\r\n\r\n"},
	{name: "control", resp: "HTTP/1.1 200 OK\r\nX-A: a\x01b\r\nContent-Length: 0\r\n\r\n"},
	{name: "not HTTP", resp: "SSH-2.0-OpenSSH_9.2\r\n"},
	{name: "empty", resp: ""},
}

// TestQuickResponseAsNetHTTP: whatever quickResponse reads, over every
// prefix of each response of the corpus and every way the stream may
// stand (going on, ended, broken), readResponse reads the same way; and
// quickResponse does read the common responses, whole.
func TestQuickResponseAsNetHTTP(t *testing.T) {
	for _, tc := range quickCorpus {
		b := []byte(tc.resp)
		for k := 0; k <= len(b); k++ {
			for _, end := range []error{nil, io.EOF, syscall.ECONNRESET} {
				checkQuick(t, tc.name, b[:k], end)
			}
		}
		_, _, ok := quickResponse(b, io.EOF)
		if ok != tc.quick {
			t.Errorf("%s: quickResponse of the whole response, then EOF: ok %v, want %v", tc.name, ok, tc.quick)
		}
	}
}

// checkQuick fails t when quickResponse reads b (and end) other than
// readResponse does.
func checkQuick(t *testing.T, name string, b []byte, end error) {
	t.Helper()
	status, location, ok := quickResponse(b, end)
	if !ok {
		return
	}
	u, _ := url.Parse("http://10.0.0.1:8080/healthz")
	req := newRequest(u, http.Header{}, "")
	pr := &partialReader{b: b, end: end}
	wantStatus, wantLocation, err := readResponse(bufio.NewReaderSize(pr, 4096), req)
	if err != nil || status != wantStatus || location != wantLocation {
		t.Fatalf("%s: %q, then %v:\nquickResponse: %d %q\nreadResponse:  %d %q %v", name, b, end, status, location, wantStatus, wantLocation, err)
	}
}

func FuzzQuickResponse(f *testing.F) {
	for _, tc := range quickCorpus {
		f.Add([]byte(tc.resp), uint8(0))
		f.Add([]byte(tc.resp), uint8(1))
	}
	f.Fuzz(func(t *testing.T, b []byte, how uint8) {
		end := []error{nil, io.EOF, syscall.ECONNRESET}[int(how)%3]
		checkQuick(t, "fuzz", b, end)
	})
}
