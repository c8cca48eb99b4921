package membership

import (
	"bytes"
	"errors"
	"strings"

	"github.com/go-logr/logr"
)

// logWriter routes memberlist's log lines ("[LEVEL] memberlist: text") to
// logr. memberlist logs every stream connection at DEBUG and every probe
// hiccup at WARN, so only its errors reach the default verbosity: a
// refuted suspicion is routine, a packet that fails to decrypt is not.
type logWriter struct{ log logr.Logger }

// errMemberlist marks errors reported by memberlist itself (it gives text only).
var errMemberlist = errors.New("memberlist")

func (w logWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		level, msg := parseLogLine(string(line))
		if level < 0 {
			w.log.Error(errMemberlist, msg)
			continue
		}
		w.log.V(level).Info(msg)
	}
	return len(p), nil
}

// parseLogLine returns the logr verbosity for a memberlist line (-1 = an
// error) and the text without the level and "memberlist:" prefixes.
func parseLogLine(line string) (int, string) {
	level, text := 1, line
	if strings.HasPrefix(line, "[") {
		if end := strings.Index(line, "]"); end > 0 {
			switch line[1:end] {
			case "ERR", "ERROR":
				level = -1
			case "WARN":
				level = 1
			case "INFO":
				level = 2
			case "DEBUG":
				level = 4
			}
			text = strings.TrimSpace(line[end+1:])
		}
	}
	return level, strings.TrimPrefix(text, "memberlist: ")
}
