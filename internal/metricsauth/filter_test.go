package metricsauth

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"

	"github.com/paas-org/vip-allocator-operator/internal/agentfacts"
)

// fakeAPIServer answers TokenReviews and SubjectAccessReviews the way a real one
// would for a few known tokens, and counts them.
type fakeAPIServer struct {
	tokenReviews, accessReviews atomic.Int32
	// explainTokens are tokens for agentfacts.ExplainAudience only: a review
	// for another audience (none: the API server's) does not authenticate them.
	explainTokens map[string]authnv1.UserInfo
}

// Tokens the fake knows. "api-down" makes the TokenReview fail; the user
// "sar-fails" makes the SubjectAccessReview fail.
var fakeUsers = map[string]authnv1.UserInfo{
	"scraper-token": {Username: "system:serviceaccount:monitoring:prometheus", UID: "u-1",
		Groups: []string{"system:serviceaccounts"}, Extra: map[string]authnv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}}},
	"agent-token":     {Username: "system:serviceaccount:vip-allocator-system:agent", UID: "u-2"},
	"sar-fails-token": {Username: "sar-fails"},
}

// allowedReview is the one review the fake allows: the scraper, with everything
// the TokenReview said about it, getting /metrics.
var allowedReview = authzv1.SubjectAccessReviewSpec{
	NonResourceAttributes: &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	User:                  "system:serviceaccount:monitoring:prometheus",
	UID:                   "u-1",
	Groups:                []string{"system:serviceaccounts"},
	Extra:                 map[string]authzv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}},
}

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/apis/authentication.k8s.io/v1/tokenreviews":
		f.tokenReviews.Add(1)
		var review authnv1.TokenReview
		if !readJSON(w, r, &review) {
			return
		}
		if review.Spec.Token == "api-down" {
			http.Error(w, "etcd is down", http.StatusInternalServerError)
			return
		}
		forExplain := slices.Equal(review.Spec.Audiences, []string{agentfacts.ExplainAudience})
		if user, ok := f.explainTokens[review.Spec.Token]; ok && forExplain {
			review.Status = authnv1.TokenReviewStatus{Authenticated: true, User: user, Audiences: review.Spec.Audiences}
		} else if user, ok := fakeUsers[review.Spec.Token]; ok && len(review.Spec.Audiences) == 0 {
			review.Status = authnv1.TokenReviewStatus{Authenticated: true, User: user}
		} else {
			review.Status = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		writeJSON(w, &review)
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		f.accessReviews.Add(1)
		var review authzv1.SubjectAccessReview
		if !readJSON(w, r, &review) {
			return
		}
		if review.Spec.User == "sar-fails" {
			http.Error(w, "webhook timeout", http.StatusInternalServerError)
			return
		}
		review.Status.Allowed = reflect.DeepEqual(review.Spec, allowedReview) ||
			(review.Spec.User == "system:serviceaccount:vip-allocator-operator:vip-allocator-explain" && review.Spec.NonResourceAttributes.Path == agentfacts.Path)
		writeJSON(w, &review)
	default:
		http.NotFound(w, r)
	}
}

// readJSON decodes the request's body into v, or answers 400.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// TestFilter is one scrape after another against one filter, each step building
// on the caches the earlier ones filled; the clock moves only when a step says so.
func TestFilter(t *testing.T) {
	api := &fakeAPIServer{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	// JSON, not client-go's default protobuf, so the fake can stay small.
	cfg := &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g, err := newGatekeeper(cfg, httpClient, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("vip_allocator_up 1\n")) })
	handler, err := g.filter(testr.New(t), metrics)
	if err != nil {
		t.Fatal(err)
	}

	for _, step := range []struct {
		desc          string
		after         time.Duration // the clock moves this much before the step
		method        string        // GET unless set
		authorization string        // the Authorization header
		proxied       string        // the ProxiedTokenHeader header
		want          int
		// New reviews the step makes: 0 means the answer came from the cache.
		wantTokenReviews, wantAccessReviews int32
	}{
		{desc: "no token", want: http.StatusUnauthorized},
		{desc: "not a bearer token", authorization: "Basic c2NyYXBlcjpwdw==", want: http.StatusUnauthorized},
		{desc: "an empty bearer token", authorization: "Bearer ", want: http.StatusUnauthorized},
		{desc: "a forged token", authorization: "Bearer forged", want: http.StatusUnauthorized, wantTokenReviews: 1},
		{desc: "the forged token again: its rejection is cached", after: 5 * time.Second, authorization: "Bearer forged", want: http.StatusUnauthorized},
		{desc: "the forged token after the failure TTL: asked again", after: 6 * time.Second, authorization: "Bearer forged", want: http.StatusUnauthorized, wantTokenReviews: 1},
		{desc: "authenticated but not a metrics reader", authorization: "Bearer agent-token", want: http.StatusForbidden, wantTokenReviews: 1, wantAccessReviews: 1},
		{desc: "denied again within the deny TTL: from the cache", after: 29 * time.Second, authorization: "Bearer agent-token", want: http.StatusForbidden},
		{desc: "denied decision not cached past its 30s", after: 2 * time.Second, authorization: "Bearer agent-token", want: http.StatusForbidden, wantAccessReviews: 1},
		{desc: "a metrics reader", authorization: "Bearer scraper-token", want: http.StatusOK, wantTokenReviews: 1, wantAccessReviews: 1},
		{desc: "the next scrape costs the API server nothing", after: 15 * time.Second, authorization: "bearer  scraper-token", want: http.StatusOK},
		{desc: "past the token TTL, within the allow TTL: only a TokenReview", after: 2 * time.Minute, authorization: "Bearer scraper-token", want: http.StatusOK, wantTokenReviews: 1},
		{desc: "another verb is another decision", method: http.MethodPost, authorization: "Bearer scraper-token", want: http.StatusForbidden, wantAccessReviews: 1},
		{desc: "past the allow TTL: asked again", after: 3 * time.Minute, authorization: "Bearer scraper-token", want: http.StatusOK, wantTokenReviews: 1, wantAccessReviews: 1},
		{desc: "the TokenReview fails", authorization: "Bearer api-down", want: http.StatusInternalServerError, wantTokenReviews: 1},
		{desc: "an error is not cached", authorization: "Bearer api-down", want: http.StatusInternalServerError, wantTokenReviews: 1},
		{desc: "the SubjectAccessReview fails", authorization: "Bearer sar-fails-token", want: http.StatusInternalServerError, wantTokenReviews: 1, wantAccessReviews: 1},
		{desc: "its error is not cached either", authorization: "Bearer sar-fails-token", want: http.StatusInternalServerError, wantAccessReviews: 1},
		{desc: "through the API server's proxy: the reader's token in the proxied header", proxied: "Bearer scraper-token", want: http.StatusOK},
		{desc: "a forged token in the proxied header", after: time.Minute, proxied: "Bearer forged", want: http.StatusUnauthorized, wantTokenReviews: 1},
		{desc: "Authorization alone judges a request that has both", authorization: "Bearer agent-token", proxied: "Bearer scraper-token", want: http.StatusForbidden, wantTokenReviews: 1, wantAccessReviews: 1},
	} {
		now = now.Add(step.after)
		tokenReviews, accessReviews := api.tokenReviews.Load(), api.accessReviews.Load()
		method := step.method
		if method == "" {
			method = http.MethodGet
		}
		req := httptest.NewRequest(method, "/metrics", nil)
		if step.authorization != "" {
			req.Header.Set("Authorization", step.authorization)
		}
		if step.proxied != "" {
			req.Header.Set(ProxiedTokenHeader, step.proxied)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)

		if rec.Code != step.want {
			t.Errorf("%s: HTTP %d, want %d: %s", step.desc, rec.Code, step.want, rec.Body)
		}
		if got := api.tokenReviews.Load() - tokenReviews; got != step.wantTokenReviews {
			t.Errorf("%s: %d TokenReviews, want %d", step.desc, got, step.wantTokenReviews)
		}
		if got := api.accessReviews.Load() - accessReviews; got != step.wantAccessReviews {
			t.Errorf("%s: %d SubjectAccessReviews, want %d", step.desc, got, step.wantAccessReviews)
		}
	}
}

// TestCacheIsBounded: a flood of new keys keeps the cache at its size, drops
// expired entries first and then the one closest to expiring, which is a
// short-lived rejection before a long-lived success.
func TestCacheIsBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := func(i byte) cacheKey { return cacheKey{i} }
	c := newExpiringCache[bool](3)
	c.put(key(1), true, authenticatedTTL, now)
	c.put(key(2), false, unauthenticatedTTL, now)
	c.put(key(3), true, authenticatedTTL, now)

	c.put(key(4), true, authenticatedTTL, now)
	if _, ok := c.get(key(2), now); ok || c.len() != 3 {
		t.Errorf("full cache: the soonest-expiring entry should have made room (%d entries)", c.len())
	}
	for _, k := range []byte{1, 3, 4} {
		if _, ok := c.get(key(k), now); !ok {
			t.Errorf("entry %d dropped", k)
		}
	}

	later := now.Add(authenticatedTTL)
	for i := byte(10); i < 100; i++ {
		c.put(key(i), false, unauthenticatedTTL, later)
	}
	if c.len() != 3 {
		t.Errorf("after a flood of keys: %d entries, want 3", c.len())
	}
	if _, ok := c.get(key(99), later); !ok {
		t.Error("the newest entry is missing")
	}
	if _, ok := c.get(key(99), later.Add(unauthenticatedTTL)); ok {
		t.Error("an entry outlived its TTL")
	}
}

// TestTokenReviewsAreRateLimited: anyone who reaches the port may send a new
// bogus token with each request; past a burst the API server is asked at a
// steady rate only, and the rest are told to come back (429). A token with a
// cached answer is never held back.
func TestTokenReviewsAreRateLimited(t *testing.T) {
	api := &fakeAPIServer{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g, err := newGatekeeper(cfg, httpClient, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("vip_allocator_up 1\n")) })
	handler, err := g.filter(testr.New(t), metrics)
	if err != nil {
		t.Fatal(err)
	}
	get := func(token string) int {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := get("scraper-token"); code != http.StatusOK {
		t.Fatalf("the scraper: HTTP %d", code)
	}
	limited := 0
	for i := range 1000 {
		if get(fmt.Sprintf("bogus-%d", i)) == http.StatusTooManyRequests {
			limited++
		}
	}
	if n := api.tokenReviews.Load(); n > tokenReviewBurst+1 {
		t.Errorf("1000 bogus tokens at once cost %d TokenReviews, want at most the burst (%d) and the scraper's", n, tokenReviewBurst)
	}
	if limited < 1000-tokenReviewBurst {
		t.Errorf("%d of 1000 bogus tokens told to come back, want all past the burst", limited)
	}
	if code := get("scraper-token"); code != http.StatusOK {
		t.Errorf("the scraper, its token cached, during the flood: HTTP %d", code)
	}
	now = now.Add(time.Second)
	before := api.tokenReviews.Load()
	for i := range 100 {
		get(fmt.Sprintf("later-%d", i))
	}
	if n := api.tokenReviews.Load() - before; n > tokenReviewsPerSecond {
		t.Errorf("a second later: %d TokenReviews, want at most %d", n, tokenReviewsPerSecond)
	}
}

// TestDebugPathTakesExplainTokensOnly: /debug/vips authenticates a token for
// the explain audience alone, so a token the API server takes (a scraper's,
// a person's) is worth nothing there, and an explain token nothing elsewhere.
func TestDebugPathTakesExplainTokensOnly(t *testing.T) {
	api := &fakeAPIServer{explainTokens: map[string]authnv1.UserInfo{
		"explain-token": {Username: "system:serviceaccount:vip-allocator-operator:vip-allocator-explain"}}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGatekeeper(cfg, httpClient, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	handler, err := g.filter(testr.New(t), ok)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{agentfacts.Path, "explain-token", http.StatusOK},
		{agentfacts.Path, "scraper-token", http.StatusUnauthorized},
		{"/metrics", "explain-token", http.StatusUnauthorized},
		{"/metrics", "scraper-token", http.StatusOK},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		req.Header.Set("Authorization", "Bearer "+tc.token)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s with %s: HTTP %d, want %d", tc.path, tc.token, rec.Code, tc.want)
		}
	}
}
