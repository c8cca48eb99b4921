package main

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/slimcache"
	agentnodes "github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
)

// watcher is one client's set of informers, with what it received: bytes
// off its connections (TLS records, as the API server sends them) and the
// events its informers delivered.
type watcher struct {
	name   string
	bytes  atomic.Int64
	events atomic.Int64
	start  func(ctx context.Context) error
	cache  client.Reader // an agent watcher's cache, once started
}

// countingConfig is cfg dialling connections that count what they read
// into w.
func (w *watcher) countingConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	d := &net.Dialer{Timeout: 30 * time.Second}
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, n: &w.bytes}, nil
	}
	return cfg
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// counter is an event handler that counts what it is handed.
func (w *watcher) counter() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.events.Add(1) },
		UpdateFunc: func(any, any) { w.events.Add(1) },
		DeleteFunc: func(any) { w.events.Add(1) },
	}
}

// Which Nodes an agent watcher watches.
const (
	ownNodeAndViews   = iota // as the agent ships: its own Node, and every NodeView
	everyNode                // the agent before NodeViews: every Node in full
	everyNodeMetadata        // every Node's metadata only (the cut measured before NodeViews)
)

// agentWatcher is a node agent's informer set (the kinds its controllers
// watch, nodeagent/agent.go, announcer.go and nodeview_publisher.go, with its
// cache options): every Service and EndpointSlice, the ledger, the IPGroups
// and the BGPPeers, and the Nodes as nodes says, self being the agent's own.
func agentWatcher(name string, cfg *rest.Config, nodes int, self string) *watcher {
	w := &watcher{name: name}
	w.start = func(ctx context.Context) error {
		opts := cache.Options{DefaultTransform: slimcache.Transform}
		if nodes == ownNodeAndViews {
			opts = agentnodes.CacheOptions(self)
		}
		opts.Scheme = paasv1.NewScheme()
		c, err := cache.New(w.countingConfig(cfg), opts)
		if err != nil {
			return err
		}
		kinds := []client.Object{&corev1.Service{}, &discoveryv1.EndpointSlice{}, &paasv1.IP{}, &paasv1.IPGroup{}, &paasv1.BGPPeer{}}
		switch nodes {
		case ownNodeAndViews:
			kinds = append(kinds, &corev1.Node{}, &paasv1.NodeView{})
		case everyNode:
			kinds = append(kinds, &corev1.Node{})
		case everyNodeMetadata:
			kinds = append(kinds, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}})
		}
		for _, o := range kinds {
			inf, err := c.GetInformer(ctx, o)
			if err != nil {
				return fmt.Errorf("informer for %T: %w", o, err)
			}
			if _, err := inf.AddEventHandler(w.counter()); err != nil {
				return err
			}
		}
		w.cache = c
		go func() { _ = c.Start(ctx) }()
		if !c.WaitForCacheSync(ctx) {
			return fmt.Errorf("%s: caches did not sync", name)
		}
		return nil
	}
	return w
}

// kubeProxyWatcher is kube-proxy's informer set (cmd/kube-proxy, v1.36):
// Services and EndpointSlices not claimed by another proxy (and Services not
// headless), and its own Node only, over protobuf as kube-proxy asks.
func kubeProxyWatcher(cfg *rest.Config, self string) *watcher {
	w := &watcher{name: "kube-proxy (its informer set, client-go)"}
	w.start = func(ctx context.Context) error {
		pc := w.countingConfig(cfg)
		pc.ContentType = runtime.ContentTypeProtobuf
		pc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
		cs, err := kubernetes.NewForConfig(pc)
		if err != nil {
			return err
		}
		notClaimed := informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"
		})
		shared := informers.NewSharedInformerFactoryWithOptions(cs, 0, notClaimed)
		own := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", self).String()
		}))
		for _, inf := range []toolscache.SharedIndexInformer{shared.Core().V1().Services().Informer(),
			shared.Discovery().V1().EndpointSlices().Informer(), own.Core().V1().Nodes().Informer()} {
			if _, err := inf.AddEventHandler(w.counter()); err != nil {
				return err
			}
		}
		shared.Start(ctx.Done())
		own.Start(ctx.Done())
		for _, f := range []informers.SharedInformerFactory{shared, own} {
			for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
				if !ok {
					return fmt.Errorf("kube-proxy: %v did not sync", typ)
				}
			}
		}
		return nil
	}
	return w
}
