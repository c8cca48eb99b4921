package metricsauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/paas-org/vip-allocator-operator/internal/agentfacts"
)

// How long review results are reused: the API server's delegating defaults for
// decisions, and for tokens long enough that a scraper every few seconds costs
// the API server a TokenReview every two minutes, short enough that a revoked
// token stops working soon after.
const (
	authenticatedTTL   = 2 * time.Minute
	unauthenticatedTTL = 10 * time.Second
	allowedTTL         = 5 * time.Minute
	deniedTTL          = 30 * time.Second

	// maxCachedResults bounds each cache: far more scrapers than any cluster has.
	maxCachedResults = 4096
	// reviewTimeout keeps a slow API server from holding scrapes open forever.
	reviewTimeout = 10 * time.Second

	// TokenReviews the filter asks for tokens it has no answer for: a burst (a
	// Prometheus restart, explain over every node) and then a steady rate.
	// Anyone who reaches the port can send a new bogus token with each request,
	// and each would cost the API server a review: past this, 429.
	tokenReviewsPerSecond = 2
	tokenReviewBurst      = 20
)

// WithTokenAndAccessReviews is a metricsserver.Options FilterProvider: the
// metrics server answers only callers whose bearer token a TokenReview
// authenticates and whom a SubjectAccessReview allows the request's verb on its
// path (get /metrics). No or an unknown token is 401, a caller not allowed 403,
// and any error asking the API server 500: nothing gets through unchecked.
func WithTokenAndAccessReviews(c *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	g, err := newGatekeeper(c, httpClient, time.Now)
	if err != nil {
		return nil, err
	}
	return g.filter, nil
}

// gatekeeper asks the API server about each caller and remembers its answers.
type gatekeeper struct {
	tokenReviews  authnclient.TokenReviewInterface
	accessReviews authzclient.SubjectAccessReviewInterface
	now           func() time.Time // injectable so tests can step past the TTLs

	identities *expiringCache[identity] // by SHA-256 of the token
	decisions  *expiringCache[bool]     // by SHA-256 of the SubjectAccessReview's spec
	reviews    *rate.Limiter            // TokenReviews of tokens not cached
}

// errTooManyReviews: the TokenReview budget is spent (tokenReviewsPerSecond).
var errTooManyReviews = errors.New("too many unknown tokens: TokenReviews are rate limited")

// identity is what a TokenReview said about a token.
type identity struct {
	authenticated bool
	user          authnv1.UserInfo
}

func newGatekeeper(c *rest.Config, httpClient *http.Client, now func() time.Time) (*gatekeeper, error) {
	authn, err := authnclient.NewForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, fmt.Errorf("tokenreview client: %w", err)
	}
	authz, err := authzclient.NewForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, fmt.Errorf("subjectaccessreview client: %w", err)
	}
	return &gatekeeper{
		tokenReviews:  authn.TokenReviews(),
		accessReviews: authz.SubjectAccessReviews(),
		now:           now,
		identities:    newExpiringCache[identity](maxCachedResults),
		decisions:     newExpiringCache[bool](maxCachedResults),
		reviews:       rate.NewLimiter(tokenReviewsPerSecond, tokenReviewBurst),
	}, nil
}

// filter is the metricsserver.Filter: it wraps the metrics handler.
func (g *gatekeeper) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearerToken(req)
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		id, err := g.authenticate(req.Context(), token, pathAudiences[req.URL.Path])
		if errors.Is(err, errTooManyReviews) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Too many requests", http.StatusTooManyRequests)
			return
		}
		if err != nil {
			log.Error(err, "Authenticating a metrics request")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if !id.authenticated {
			log.V(4).Info("Metrics request with a token the API server does not authenticate")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		allowed, err := g.authorize(req.Context(), accessReview(id.user, req))
		if err != nil {
			log.Error(err, "Authorizing a metrics request", "user", id.user.Username)
			http.Error(w, "Authorization for user "+id.user.Username+" failed", http.StatusInternalServerError)
			return
		}
		if !allowed {
			log.V(4).Info("Metrics request denied", "user", id.user.Username, "path", req.URL.Path)
			http.Error(w, "Authorization denied for user "+id.user.Username, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	}), nil
}

// ProxiedTokenHeader carries a caller's bearer token ("Bearer <token>")
// through the API server's pods/proxy subresource, which authenticates the
// Authorization header itself and removes it before proxying. The token is
// reviewed exactly like one in Authorization; a request with both is judged
// by Authorization alone.
const ProxiedTokenHeader = "X-Vip-Allocator-Authorization"

// bearerToken is the token of an "Authorization: Bearer <token>" header, or
// else of the same in ProxiedTokenHeader.
func bearerToken(req *http.Request) (string, bool) {
	value := req.Header.Get("Authorization")
	if value == "" {
		value = req.Header.Get(ProxiedTokenHeader)
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(value), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

// pathAudiences are the audiences a token must be for on a path (none: the API
// server's own): the agents' debug path takes explain tokens only, which the
// API server itself refuses.
var pathAudiences = map[string][]string{agentfacts.Path: {agentfacts.ExplainAudience}}

// authenticate asks a TokenReview about token, for audiences (none: the API
// server's), unless a recent answer is cached. An error is never cached: the
// next scrape asks again.
func (g *gatekeeper) authenticate(ctx context.Context, token string, audiences []string) (identity, error) {
	key := cacheKey(sha256.Sum256([]byte(strings.Join(audiences, ",") + "\x00" + token)))
	if id, ok := g.identities.get(key, g.now()); ok {
		return id, nil
	}
	if !g.reviews.AllowN(g.now(), 1) {
		return identity{}, errTooManyReviews
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := g.tokenReviews.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: audiences}}, metav1.CreateOptions{})
	if err != nil {
		return identity{}, fmt.Errorf("tokenreview: %w", err)
	}
	// A review that says "not authenticated" (Status.Error set or not) is an
	// answer about the token, not a failure to ask: 401, and remembered briefly.
	id := identity{authenticated: review.Status.Authenticated, user: review.Status.User}
	ttl := unauthenticatedTTL
	if id.authenticated {
		ttl = authenticatedTTL
	}
	g.identities.put(key, id, ttl, g.now())
	return id, nil
}

// accessReview asks whether user may do req's verb on its path, a non-resource URL.
func accessReview(user authnv1.UserInfo, req *http.Request) *authzv1.SubjectAccessReview {
	var extra map[string]authzv1.ExtraValue
	if len(user.Extra) > 0 {
		extra = make(map[string]authzv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			extra[k] = authzv1.ExtraValue(v)
		}
	}
	return &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: req.URL.Path, Verb: verb(req.Method)},
		User:                  user.Username,
		Groups:                user.Groups,
		UID:                   user.UID,
		Extra:                 extra,
	}}
}

// verb is the RBAC verb for an HTTP method on a non-resource URL: the API
// server uses the lower-cased method there (GET /healthz is "get", POST is
// "post", not "create" as on resources), so a ClusterRole's nonResourceURLs rule
// reads the same for our metrics as for the API server's own /metrics.
func verb(method string) string {
	return strings.ToLower(method)
}

// authorize asks a SubjectAccessReview unless a recent answer for the same
// user, groups, path and verb is cached. An error is never cached.
func (g *gatekeeper) authorize(ctx context.Context, review *authzv1.SubjectAccessReview) (bool, error) {
	spec, err := json.Marshal(review.Spec)
	if err != nil {
		return false, fmt.Errorf("subjectaccessreview key: %w", err)
	}
	key := cacheKey(sha256.Sum256(spec))
	if allowed, ok := g.decisions.get(key, g.now()); ok {
		return allowed, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	answer, err := g.accessReviews.Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("subjectaccessreview: %w", err)
	}
	ttl := deniedTTL
	if answer.Status.Allowed {
		ttl = allowedTTL
	}
	g.decisions.put(key, answer.Status.Allowed, ttl, g.now())
	return answer.Status.Allowed, nil
}
