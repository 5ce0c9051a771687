package probe

import (
	"bytes"
	"io"

	"golang.org/x/net/http/httpguts"
)

// quickResponse reads the common response from b, all that was read of
// one so far (end: io.EOF or the read's error once the stream ended, nil
// while it goes on), without net/http: a status line of HTTP/1.0 or 1.1
// with a final status, header fields of plain tokens and visible values
// each on a line of its own, and a body sized by Content-Length or ended
// by the end of the stream. It returns what readResponse would return for
// such a response, and ok false for anything else, which readResponse
// then reads: an incomplete response, an interim status, chunked
// encoding, a folded or odd header line. It allocates nothing but the
// Location. A node that probes thousands of endpoints parses as many
// responses a second, and http.ReadResponse's header map, strings and
// reader cost a fifth of the prober's time in user space and most of its
// garbage (docs/performance.md, "The prober's own cost").
func quickResponse(b []byte, end error) (status int, location string, ok bool) {
	line, rest, found := bytes.Cut(b, crlf)
	if !found || len(line) < len("HTTP/1.1 200") || len(b) >= maxRead || !plainValue(line) {
		return 0, "", false
	}
	if string(line[:len("HTTP/1.")]) != "HTTP/1." || line[7] != '0' && line[7] != '1' || line[8] != ' ' {
		return 0, "", false
	}
	code := line[9:12]
	if len(line) > 12 && line[12] != ' ' {
		return 0, "", false
	}
	for _, c := range code {
		if c < '0' || c > '9' {
			return 0, "", false
		}
		status = status*10 + int(c-'0')
	}
	if status < 200 {
		return 0, "", false // interim (1xx) or not a status
	}
	length := -1 // Content-Length; -1: none, the body ends with the stream
	hasLocation := false
	var loc []byte
	for {
		line, rest, found = bytes.Cut(rest, crlf)
		if !found {
			return 0, "", false // the head goes on
		}
		if len(line) == 0 {
			break // the body follows
		}
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found || len(name) == 0 || !plainValue(value) {
			return 0, "", false
		}
		for _, c := range name {
			if !httpguts.IsTokenRune(rune(c)) {
				return 0, "", false
			}
		}
		value = bytes.Trim(value, " \t")
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length >= 0 || len(value) == 0 || len(value) > 9 {
				return 0, "", false // repeated, empty or huge: net/http decides
			}
			length = 0
			for _, c := range value {
				if c < '0' || c > '9' {
					return 0, "", false
				}
				length = length*10 + int(c-'0')
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, "", false
		case bytes.EqualFold(name, []byte("Location")) && !hasLocation:
			loc, hasLocation = value, true
		}
	}
	switch {
	case status == 204 || status == 304:
		// No body, whatever the head says.
	case length >= 0:
		if len(rest) < min(length, maxBody) {
			return 0, "", false // the body goes on, or ended early
		}
	case end != io.EOF:
		return 0, "", false // the body ends with the stream
	}
	return status, string(loc), true
}

var crlf = []byte("\r\n")

// plainValue tells whether v holds only visible ASCII, spaces and tabs:
// what every reader takes as it is.
func plainValue(v []byte) bool {
	for _, c := range v {
		if c < ' ' && c != '\t' || c >= 0x7f {
			return false
		}
	}
	return true
}
