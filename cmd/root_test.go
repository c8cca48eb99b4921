package cmd

import (
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
)

// TestUsageNamesRunnableCommands checks both ways between the usage text and Run: every
// command the usage lists is one Run dispatches (its -h reaches the command's own flags),
// and every command Run dispatches is listed.
func TestUsageNamesRunnableCommands(t *testing.T) {
	stderr := os.Stderr
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	os.Stderr = devnull // the flag sets print their defaults on -h
	defer func() { os.Stderr = stderr; devnull.Close() }()

	listed := map[string]bool{}
	_, commands, _ := strings.Cut(usage, "commands:\n")
	for _, line := range strings.Split(commands, "\n") {
		name, _, ok := strings.Cut(strings.TrimPrefix(line, "  "), "  ")
		if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") || !ok {
			continue // a continuation, a blank line or the closing sentence
		}
		listed[name] = true
		if err := Run(append(strings.Fields(name), "-h")); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("usage lists %q, but %q -h gives %v, not the command's flags", name, name, err)
		}
	}
	for _, want := range []string{"operator", "agent", "agent cleanup", "migrate plan", "migrate all",
		"migrate upgrade", "migrate metallb plan", "migrate metallb apply", "explain"} {
		if !listed[want] {
			t.Errorf("usage does not list %q", want)
		}
	}
}
