// Package metallb runs the real MetalLB controller (v0.16.1, built by hack/metallb.sh from its Go
// module into bin/metallb) against the envtest control plane, so that the MetalLB migration is
// tested on the addresses MetalLB itself hands out: its CRDs, read from the same module, are
// installed at run time and never copied into this repository. The controller allocates (it
// writes Services' status); no speaker runs here: test/e2e runs MetalLB's speakers, built by the
// same script, in its lab's nodes, and uses Build and InstallCRDs for them.
package metallb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Namespace is where MetalLB's objects live, as its manifests install it.
const Namespace = "metallb-system"

// podName is the controller's Pod object: MetalLB reads its own Pod at start (the owner of its
// ConfigurationState); no kubelet runs it, the object only has to exist.
const podName = "controller"

// Build builds (once) the controller and the speaker and returns the directory holding them and
// crd/.
func Build(root string) (string, error) {
	out, err := exec.Command(filepath.Join(root, "hack", "metallb.sh")).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("hack/metallb.sh: %w: %s", err, ee.Stderr)
		}
		return "", fmt.Errorf("hack/metallb.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// InstallCRDs installs MetalLB's CRDs from dir/crd and waits until they are served.
func InstallCRDs(cfg *rest.Config, dir string) error {
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{filepath.Join(dir, "crd")}, ErrorIfPathMissing: true})
	if err != nil {
		return fmt.Errorf("install MetalLB CRDs: %w", err)
	}
	return nil
}

// Controller is a running MetalLB controller process.
type Controller struct {
	cmd     *exec.Cmd
	done    chan error
	log     *bytes.Buffer
	stopped sync.Once
}

// Start creates MetalLB's namespace and the controller's Pod object, and runs the controller from
// dir as the holder of kubeconfig, its webhook off (nothing calls it: the tests write valid
// objects), metrics and probes on free loopback ports.
func Start(ctx context.Context, c client.Client, dir, kubeconfig string) (*Controller, error) {
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}},
		// No controller-manager creates it here; Pod admission needs it.
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "default"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: podName, Labels: map[string]string{"app": "metallb", "component": "controller"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "quay.io/metallb/controller:v0.16.1"}}}},
	} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
		}
	}
	log := &bytes.Buffer{}
	cmd := exec.Command(filepath.Join(dir, "controller"),
		"--namespace", Namespace, "--pod-name", podName, "--webhook-mode", "disabled",
		"--port", "0", "--health-probe-port", "0", "--log-level", "info")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start MetalLB controller: %w", err)
	}
	m := &Controller{cmd: cmd, done: make(chan error, 1), log: log}
	go func() { m.done <- cmd.Wait() }()
	return m, nil
}

// Stop ends the controller (SIGTERM, then SIGKILL after 10s) and returns its log. Later
// calls only return the log.
func (m *Controller) Stop() string {
	m.stopped.Do(func() {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		var err error
		select {
		case err = <-m.done:
		case <-time.After(10 * time.Second):
			_ = m.cmd.Process.Kill()
			err = <-m.done
		}
		m.done <- err // Exited still answers
	})
	return m.log.String()
}

// Exited reports whether the controller stopped by itself, and why.
func (m *Controller) Exited() (bool, error) {
	select {
	case err := <-m.done:
		m.done <- err
		return true, err
	default:
		return false, nil
	}
}
