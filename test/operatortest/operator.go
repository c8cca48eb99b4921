// Package operatortest starts the operator against a test control plane, as
// the lab tests run it.
package operatortest

import (
	"context"
	"sync"

	"k8s.io/client-go/rest"

	"github.com/paas-org/vip-allocator-operator/cmd"
)

// Start runs the operator's manager in this process with cfg's
// identity (an Env's OperatorConfig: the operator's ServiceAccount) and o;
// o.QPS and o.Burst, when set, replace cfg's client limits as the operator's
// flags do. stop ends it and returns what the manager returned; later calls
// return the same.
func Start(cfg *rest.Config, o cmd.OperatorOptions) (stop func() error, err error) {
	cfg = rest.CopyConfig(cfg)
	if o.QPS != 0 {
		cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst
	}
	mgr, err := cmd.NewManager(cfg, o)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return sync.OnceValue(func() error {
		cancel()
		return <-done
	}), nil
}
