package migration

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// speakerDS is a speaker DaemonSet as MetalLB's manifests write it (memberlist
// on the pod's IP, with labels and a secret key), changed by edit.
func speakerDS(name string, labels map[string]string, edit func(*corev1.PodSpec)) appsv1.DaemonSet {
	pod := corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{
		Name: "speaker",
		Args: []string{"--port=7472", "--log-level=info"},
		Env: []corev1.EnvVar{
			{Name: "METALLB_ML_BIND_ADDR", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "METALLB_ML_LABELS", Value: "app=metallb,component=speaker"},
			{Name: "METALLB_ML_SECRET_KEY_PATH", Value: "/etc/ml_secret_key"},
		},
	}}}
	if edit != nil {
		edit(&pod)
	}
	return appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-system", Name: name, Labels: labels},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: pod}}}
}

var manifestLabels = map[string]string{"app": "metallb", "component": "speaker"}

func setEnv(name, value string) func(*corev1.PodSpec) {
	return func(p *corev1.PodSpec) {
		c := &p.Containers[0]
		for i := range c.Env {
			if c.Env[i].Name == name {
				c.Env[i].Value = value
				return
			}
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	}
}

// The speaker's memberlist as MetalLB's speaker decides it at start
// (speaker/main.go, internal/speakerlist): off without a bind address or
// labels (the secret key only encrypts), port 7946 unless set, a flag over
// its environment variable.
func TestMetalLBSpeakerGossip(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		ds      appsv1.DaemonSet
		off     string
		port    int
		unknown string
	}{
		{desc: "MetalLB's manifests: memberlist on the default port", ds: speakerDS("speaker", manifestLabels, nil), port: 7946},
		{desc: "Helm labels, mlBindPort 7947",
			ds:   speakerDS("metallb-speaker", map[string]string{"app.kubernetes.io/name": "metallb", "app.kubernetes.io/component": "speaker"}, setEnv("METALLB_ML_BIND_PORT", "7947")),
			port: 7947},
		{desc: "Helm memberlist.enabled=false: no ML variables", ds: speakerDS("speaker", manifestLabels, func(p *corev1.PodSpec) { p.Containers[0].Env = nil }),
			off: "memberlist off (neither --ml-bindaddr nor METALLB_ML_BIND_ADDR is set)"},
		{desc: "no labels", ds: speakerDS("speaker", manifestLabels, setEnv("METALLB_ML_LABELS", "")),
			off: "memberlist off (neither --ml-labels nor METALLB_ML_LABELS is set)"},
		{desc: "no secret key: still on, unencrypted", ds: speakerDS("speaker", manifestLabels, func(p *corev1.PodSpec) { p.Containers[0].Env = p.Containers[0].Env[:2] }),
			port: 7946},
		{desc: "the flag wins over the environment", ds: speakerDS("speaker", manifestLabels, func(p *corev1.PodSpec) {
			setEnv("METALLB_ML_BIND_PORT", "7947")(p)
			p.Containers[0].Args = append(p.Containers[0].Args, "--ml-bindport", "7946")
		}), port: 7946},
		{desc: "an empty --ml-labels flag turns it off", ds: speakerDS("speaker", manifestLabels, func(p *corev1.PodSpec) {
			p.Containers[0].Args = append(p.Containers[0].Args, "-ml-labels=")
		}), off: "memberlist off (neither --ml-labels nor METALLB_ML_LABELS is set)"},
		{desc: "port from a ConfigMap", ds: speakerDS("speaker", manifestLabels, func(p *corev1.PodSpec) {
			p.Containers[0].Env = append(p.Containers[0].Env, corev1.EnvVar{Name: "METALLB_ML_BIND_PORT", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "port"}}})
		}), unknown: "its bind port comes from a reference, not a value"},
		{desc: "port that does not parse", ds: speakerDS("speaker", manifestLabels, setEnv("METALLB_ML_BIND_PORT", "gossip")),
			off: `memberlist bind port "gossip" does not parse: the speaker exits at start`},
		{desc: "no hostNetwork", ds: speakerDS("speaker", manifestLabels, func(p *corev1.PodSpec) { p.HostNetwork = false }),
			off: "runs without hostNetwork"},
	} {
		got := metallbSpeakerGossip([]appsv1.DaemonSet{tc.ds})
		if len(got) != 1 {
			t.Errorf("%s: %d speakers, want 1", tc.desc, len(got))
			continue
		}
		if g := got[0]; g.Off != tc.off || g.Port != tc.port || g.Unknown != tc.unknown {
			t.Errorf("%s: off %q, port %d, unknown %q; want %q, %d, %q", tc.desc, g.Off, g.Port, g.Unknown, tc.off, tc.port, tc.unknown)
		}
	}
	others := []appsv1.DaemonSet{
		speakerDS("frr-k8s", map[string]string{"app": "frr-k8s", "component": "speaker"}, nil),
		speakerDS("node-exporter", nil, nil),
	}
	if got := metallbSpeakerGossip(others); len(got) != 0 {
		t.Errorf("DaemonSets not labelled as MetalLB's speaker read as speakers: %+v", got)
	}
}

func TestAgentGossipOf(t *testing.T) {
	agents := func(args ...string) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "vip-allocator-operator", Name: "vip-allocator-agent"},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "agent", Args: append([]string{"agent", "--node-name=$(NODE_NAME)"}, args...)}}}}}}
	}
	for _, tc := range []struct {
		desc string
		ds   *appsv1.DaemonSet
		want agentGossip
	}{
		{"not installed yet", nil, agentGossip{7946, "the default: no DaemonSet vip-allocator-operator/vip-allocator-agent yet"}},
		{"installed without --agent-args", agents(), agentGossip{7946, "DaemonSet vip-allocator-operator/vip-allocator-agent, the default"}},
		{"--agent-args=--memberlist-port=7947", agents("--memberlist-port=7947"), agentGossip{7947, "DaemonSet vip-allocator-operator/vip-allocator-agent, --memberlist-port"}},
		{"does not parse", agents("--memberlist-port=x"), agentGossip{0, `DaemonSet vip-allocator-operator/vip-allocator-agent: --memberlist-port="x" does not parse`}},
	} {
		if got := agentGossipOf(tc.ds, "vip-allocator-operator"); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.desc, got, tc.want)
		}
	}
}

// The decision: a clash is a problem that names both sides and the fix; a
// speaker without memberlist, on another port or whose port cannot be told is
// a line of the plan only.
func TestGossipCheck(t *testing.T) {
	speaker := func(name string) Object { return Object{"DaemonSet", "metallb-system", name, ""} }
	agents := agentGossip{7946, "the default"}
	for _, tc := range []struct {
		desc     string
		speakers []speakerGossip
		agent    agentGossip
		lines    []string
		problems []string
	}{
		{desc: "no speaker", agent: agents,
			lines: []string{"no DaemonSet of namespace metallb-system labelled as MetalLB's speaker (component=speaker and app=metallb, or app.kubernetes.io/component=speaker and app.kubernetes.io/name=metallb): the gossip ports are not compared; the agents gossip on port 7946 (the default)"}},
		{desc: "both on 7946", agent: agents, speakers: []speakerGossip{{DaemonSet: speaker("speaker"), Port: 7946}},
			lines: []string{"DaemonSet metallb-system/speaker: memberlist on port 7946, the agents' too (the default): clash (see problems)"},
			problems: []string{"DaemonSet metallb-system/speaker (MetalLB's speakers) and the agents (the default) both gossip on port 7946 of the node's address: on a node running both, the one that starts second exits (bind: address already in use) and the agents cannot take over there; apply refuses and writes nothing. " +
				"Set the operator's --agent-args=--memberlist-port=7947, or MetalLB's METALLB_ML_BIND_PORT (Helm: speaker.memberlist.mlBindPort), then plan again"}},
		{desc: "the suggested port is one no speaker uses", agent: agents, speakers: []speakerGossip{
			{DaemonSet: speaker("a"), Port: 7946}, {DaemonSet: speaker("b"), Port: 7947}},
			lines: []string{
				"DaemonSet metallb-system/a: memberlist on port 7946, the agents' too (the default): clash (see problems)",
				"DaemonSet metallb-system/b: memberlist on port 7947, the agents' on 7946 (the default): no clash",
			},
			problems: []string{"DaemonSet metallb-system/a (MetalLB's speakers) and the agents (the default) both gossip on port 7946 of the node's address: on a node running both, the one that starts second exits (bind: address already in use) and the agents cannot take over there; apply refuses and writes nothing. " +
				"Set the operator's --agent-args=--memberlist-port=7948, or MetalLB's METALLB_ML_BIND_PORT (Helm: speaker.memberlist.mlBindPort), then plan again"}},
		{desc: "agents moved", agent: agentGossip{7947, "--memberlist-port"}, speakers: []speakerGossip{{DaemonSet: speaker("speaker"), Port: 7946}},
			lines: []string{"DaemonSet metallb-system/speaker: memberlist on port 7946, the agents' on 7947 (--memberlist-port): no clash"}},
		{desc: "memberlist off", agent: agents, speakers: []speakerGossip{{DaemonSet: speaker("speaker"), Off: "memberlist off (x)"}},
			lines: []string{"DaemonSet metallb-system/speaker: memberlist off (x); no clash with the agents' gossip on port 7946 (the default)"}},
		{desc: "port cannot be told", agent: agents, speakers: []speakerGossip{{DaemonSet: speaker("speaker"), Unknown: "from a reference"}},
			lines: []string{"DaemonSet metallb-system/speaker: memberlist on, its port cannot be told (from a reference): make sure it is not 7946, the agents' (the default)"}},
	} {
		lines, problems := gossipCheck("metallb-system", tc.speakers, tc.agent)
		if strings.Join(lines, "\n") != strings.Join(tc.lines, "\n") {
			t.Errorf("%s: lines\n%s\nwant\n%s", tc.desc, strings.Join(lines, "\n"), strings.Join(tc.lines, "\n"))
		}
		if strings.Join(problems, "\n") != strings.Join(tc.problems, "\n") {
			t.Errorf("%s: problems\n%s\nwant\n%s", tc.desc, strings.Join(problems, "\n"), strings.Join(tc.problems, "\n"))
		}
	}
}

func TestFlagValue(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		value string
		ok    bool
	}{
		{[]string{"--port=7472"}, "", false},
		{[]string{"--ml-bindport=7947"}, "7947", true},
		{[]string{"-ml-bindport", "7947"}, "7947", true},
		{[]string{"--ml-bindport=7947", "--ml-bindport=7948"}, "7948", true},
		{[]string{"--", "--ml-bindport=7947"}, "", false},
		{[]string{"--ml-bindport"}, "", true},
	} {
		if v, ok := flagValue(tc.args, "ml-bindport"); v != tc.value || ok != tc.ok {
			t.Errorf("%q: %q %t, want %q %t", tc.args, v, ok, tc.value, tc.ok)
		}
	}
}

// The plan shows the clash under problems, and apply refuses before it writes
// anything (a nil client would panic on a write).
func TestMetalLBGossipClashRefusesApply(t *testing.T) {
	st := MetalLBState{Namespace: "metallb-system", DaemonSets: []appsv1.DaemonSet{speakerDS("speaker", manifestLabels, nil)}}
	p := ConvertMetalLB(st)
	if len(p.GossipClashes) != 1 || len(p.Problems) != 1 {
		t.Fatalf("clashes %q, problems %q: want the one clash", p.GossipClashes, p.Problems)
	}
	var plan bytes.Buffer
	PrintMetalLBPlan(&plan, p)
	for _, want := range []string{
		"gossip ports (MetalLB's speakers, the agents):\n  DaemonSet metallb-system/speaker: memberlist on port 7946, the agents' too (the default: no DaemonSet vip-allocator-operator/vip-allocator-agent yet): clash (see problems)",
		"--agent-args=--memberlist-port=7947",
	} {
		if !strings.Contains(plan.String(), want) {
			t.Errorf("the plan does not say %q:\n%s", want, plan.String())
		}
	}
	var out bytes.Buffer
	if err := ApplyMetalLB(context.Background(), nil, p, MetalLBApplyOptions{}, &out); !errors.Is(err, errRefused) {
		t.Errorf("apply: %v, want refused", err)
	}
	if !strings.Contains(out.String(), "nothing written") {
		t.Errorf("apply says %q", out.String())
	}
}
