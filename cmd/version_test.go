package cmd

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: version prints the release set at build time (-X
// .../cmd.version), the Go version and the platform, for a person or as JSON.
func TestVersion(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = "v9.8.7"
	out := func(args ...string) string {
		root := NewRoot(Name)
		var b bytes.Buffer
		root.SetOut(&b)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%s: %v", strings.Join(args, " "), err)
		}
		return b.String()
	}
	if text := out("version"); !strings.HasPrefix(text, "vip-allocator v9.8.7\n") || !strings.Contains(text, runtime.Version()) {
		t.Errorf("version: %q", text)
	}
	var v Version
	if err := json.Unmarshal([]byte(out("version", "-o", "json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Version != "v9.8.7" || v.GoVersion != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("version -o json: %+v", v)
	}
	if y := out("version", "-o", "yaml"); !strings.Contains(y, "version: v9.8.7\n") {
		t.Errorf("version -o yaml: %q", y)
	}
}
