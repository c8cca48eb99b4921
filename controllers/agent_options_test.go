package controllers

import (
	"slices"
	"strings"
	"testing"
)

func TestParseAgentArgs(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"", nil, ""},
		{"--dataplane=iptables  --liveness-timers=lan", []string{"--dataplane=iptables", "--liveness-timers=lan"}, ""},
		{"--dataplane iptables", nil, `"iptables": want flags`},
		{"--node-name=x", nil, "--node-name is set by the operator"},
		{"--daemonset=ns/ds", nil, "--daemonset is set by the operator"},
	}
	for _, tt := range tests {
		got, err := ParseAgentArgs(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseAgentArgs(%q) error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseAgentArgs(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}
