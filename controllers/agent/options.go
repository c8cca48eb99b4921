package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ParseArgs splits the operator's --agent-args into the agents' extra
// flags (Options.ExtraArgs). The operator sets --node-name,
// --daemonset and --on-cordon itself: a second value would fight it.
func ParseArgs(s string) ([]string, error) {
	args := strings.Fields(s)
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			return nil, fmt.Errorf("%q: want flags such as --dataplane=iptables, each with its value after '='", a)
		}
		switch name, _, _ := strings.Cut(a, "="); name {
		case "--node-name", "--daemonset":
			return nil, fmt.Errorf("%s is set by the operator", name)
		case "--on-cordon":
			// The operator's Announceable condition must judge cordoned nodes as the agents do.
			return nil, fmt.Errorf("--on-cordon is set by the operator: use the operator's own --on-cordon")
		}
	}
	return args, nil
}

// OwnImage reads the operator's image from its own pod (the Role in its
// namespace lets it get pods): the agent runs the same image, so a mirrored
// image needs no second setting (Options.Image).
func OwnImage(ctx context.Context, c client.Reader, namespace, pod string) (string, error) {
	if pod == "" {
		return "", errors.New("$POD_NAME is not set")
	}
	var p corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: pod}, &p); err != nil {
		return "", fmt.Errorf("get pod %s/%s: %w", namespace, pod, err)
	}
	for _, c := range p.Spec.Containers {
		if c.Name == "operator" {
			return c.Image, nil
		}
	}
	return "", fmt.Errorf("pod %s/%s has no container named operator", namespace, pod)
}
