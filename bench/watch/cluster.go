package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/fanout"
	"github.com/paas-org/vip-allocator-operator/internal/nodeview"
)

// The simulated cluster: Node objects as a kubelet (v1.36) writes them, with
// the agent's interfaces annotation, and LoadBalancer Services.

func nodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

// node is Node i as the kubelet registers it: labels the kubelet and a cloud
// set, its 50 largest images (--node-status-max-images, default 50), its
// capacity, and the agent's interfaces annotation.
func node(i int) *corev1.Node {
	ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	ifaces, _ := json.Marshal([]paasv1.NodeInterface{{Name: "eth0", MAC: fmt.Sprintf("52:54:00:%02x:%02x:%02x", i>>16&0xff, i>>8&0xff, i&0xff),
		Addrs: []netip.Prefix{netip.PrefixFrom(ip, 16)}}})
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName(i),
			Labels: map[string]string{
				"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": nodeName(i),
				"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
				"node.kubernetes.io/instance-type": "m5.2xlarge", "topology.kubernetes.io/region": "eu-west-1",
				"topology.kubernetes.io/zone": fmt.Sprintf("eu-west-1%c", 'a'+i%3), "node-role.kubernetes.io/worker": "",
			},
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				paasv1.NodeInterfacesAnnotation:                          string(ifaces),
			}},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.244.%d.0/24", i%256), PodCIDRs: []string{fmt.Sprintf("10.244.%d.0/24", i%256)},
			ProviderID: fmt.Sprintf("aws:///eu-west-1a/i-%017x", i)},
	}
	return n
}

// nodeStatus is the status the kubelet reports for Node i at now.
func nodeStatus(i int, now time.Time) corev1.NodeStatus {
	ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32408572Ki"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("101430960Ki"),
		"hugepages-1Gi": resource.MustParse("0"), "hugepages-2Mi": resource.MustParse("0"),
	}
	t := metav1.NewTime(now.Truncate(time.Second))
	since := metav1.NewTime(now.Add(-72 * time.Hour).Truncate(time.Second))
	cond := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: status, LastHeartbeatTime: t, LastTransitionTime: since, Reason: reason, Message: msg}
	}
	s := corev1.NodeStatus{
		Capacity: res, Allocatable: res,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip.String()}, {Type: corev1.NodeHostName, Address: nodeName(i)}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		NodeInfo: corev1.NodeSystemInfo{MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("ec2%029x", i), BootID: fmt.Sprintf("%032x", i*7),
			KernelVersion: "6.1.0-28-cloud-amd64", OSImage: "Debian GNU/Linux 12 (bookworm)", ContainerRuntimeVersion: "containerd://2.1.4",
			KubeletVersion: "v1.36.3", OperatingSystem: "linux", Architecture: "amd64"},
	}
	for k := range 50 {
		s.Images = append(s.Images, corev1.ContainerImage{SizeBytes: int64(20_000_000 + k*1_000_003), Names: []string{
			fmt.Sprintf("registry.example.com/team-%02d/app-%02d@sha256:%064x", k%7, k, k*7919),
			fmt.Sprintf("registry.example.com/team-%02d/app-%02d:v1.%d.%d", k%7, k, k, i%10)}})
	}
	return s
}

// createNodes creates n Nodes, each with its status, and the NodeView its
// agent publishes of it.
func createNodes(ctx context.Context, c client.Client, n int) error {
	now := time.Now()
	return fanout.Run(32, n, func(i int) error {
		nd := node(i)
		if err := c.Create(ctx, nd); err != nil {
			return fmt.Errorf("create Node %s: %w", nd.Name, err)
		}
		nd.Status = nodeStatus(i, now)
		if err := c.Status().Update(ctx, nd); err != nil {
			return fmt.Errorf("status of Node %s: %w", nd.Name, err)
		}
		view, _ := nodeview.Of(nd)
		if err := c.Create(ctx, view); err != nil {
			return fmt.Errorf("create NodeView %s: %w", nd.Name, err)
		}
		return nil
	})
}

// reportStatus is one of the kubelet's status reports for Node i: the
// conditions' heartbeats move on (a strategic-merge patch of the
// conditions, as the kubelet sends).
func reportStatus(ctx context.Context, c client.Client, i int, now time.Time) error {
	s := nodeStatus(i, now)
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": s.Conditions}})
	if err != nil {
		return err
	}
	nd := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i)}}
	if err := c.Status().Patch(ctx, nd, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("report status of %s: %w", nodeName(i), err)
	}
	return nil
}

// createServices creates n LoadBalancer Services in namespace ns.
func createServices(ctx context.Context, c client.Client, ns string, n int) error {
	return fanout.Run(32, n, func(i int) error {
		name := fmt.Sprintf("svc-%05d", i)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name}, AllocateLoadBalancerNodePorts: ptr.To(false),
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)},
					{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}}}}
		if err := c.Create(ctx, svc); err != nil {
			return fmt.Errorf("create Service %s: %w", name, err)
		}
		return nil
	})
}
