package fleet

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// newLogLogger is a log.Logger for memberlist that writes to l, at the
// level of memberlist's "[ERR]", "[WARN]", "[INFO]", "[DEBUG]" prefix
// (INFO as Debug: memberlist is chatty).
func newLogLogger(l *slog.Logger) *log.Logger {
	return log.New(&logWriter{l: l}, "", 0)
}

type logWriter struct{ l *slog.Logger }

func (w *logWriter) Write(b []byte) (int, error) {
	msg := bytes.TrimSpace(b)
	level := slog.LevelDebug
	for _, p := range []struct {
		prefix string
		level  slog.Level
	}{{"[ERR] ", slog.LevelError}, {"[WARN] ", slog.LevelWarn}, {"[INFO] ", slog.LevelDebug}, {"[DEBUG] ", slog.LevelDebug}} {
		if rest, ok := bytes.CutPrefix(msg, []byte(p.prefix)); ok {
			msg, level = rest, p.level
			break
		}
	}
	w.l.Log(context.Background(), level, string(msg))
	return len(b), nil
}
