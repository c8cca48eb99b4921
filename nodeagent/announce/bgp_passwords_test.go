package announce

import (
	"context"
	"errors"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// outageReader fails every read while down, as an API server that is away.
type outageReader struct {
	client.Reader
	down bool
}

func (r *outageReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if r.down {
		return errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestBGPPasswordsSurviveAnOutage: the last passwords read stay while the
// API server cannot be asked; only a successful read changes them, and a
// Secret read as gone means no password.
func TestBGPPasswordsSurviveAnOutage(t *testing.T) {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: paasv1.BGPPasswordsSecret},
		Data: map[string][]byte{"tor-a": []byte("a1"), "tor-b": []byte("b1")}}
	c := fake.NewClientBuilder().WithObjects(secret).Build()
	r := &outageReader{Reader: c}
	read := bgpPasswordsEvery(r, "ns", 0)
	steps := []struct {
		desc    string
		change  func()
		want    map[string]string
		wantErr bool
	}{
		{"first read", func() {}, map[string]string{"tor-a": "a1", "tor-b": "b1"}, false},
		{"outage: the last ones stay", func() { r.down = true }, map[string]string{"tor-a": "a1", "tor-b": "b1"}, true},
		{"still down, the Secret changed meanwhile", func() {
			secret.Data = map[string][]byte{"tor-a": []byte("a2")}
			if err := c.Update(ctx, secret); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"tor-a": "a1", "tor-b": "b1"}, true},
		{"back: the new answer, tor-b gone", func() { r.down = false }, map[string]string{"tor-a": "a2"}, false},
		{"Secret deleted: read as gone", func() {
			if err := c.Delete(ctx, secret); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{}, false},
		{"outage after that: still none", func() { r.down = true }, map[string]string{}, true},
	}
	for _, s := range steps {
		s.change()
		got, err := read(ctx)
		if (err != nil) != s.wantErr {
			t.Errorf("%s: error %v, want error %v", s.desc, err, s.wantErr)
		}
		if !maps.Equal(got, s.want) {
			t.Errorf("%s: passwords %v, want %v", s.desc, got, s.want)
		}
	}
}

// TestBGPPasswordsNeverReadWait: before any read succeeded there is nothing
// to keep; a peer with a password waits.
func TestBGPPasswordsNeverReadWait(t *testing.T) {
	read := bgpPasswordsEvery(&outageReader{Reader: fake.NewClientBuilder().Build(), down: true}, "ns", 0)
	if got, err := read(context.Background()); err == nil || got != nil {
		t.Errorf("passwords %v, error %v: want none and the error", got, err)
	}
}
