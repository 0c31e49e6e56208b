package main

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// reviewTimeout bounds the two reviews of one scrape.
const reviewTimeout = 10 * time.Second

// metricsAuthFilter is the metrics endpoint's filter with --metrics-secure: a request
// needs a bearer token the API server authenticates (TokenReview) for a user it allows
// to get the non-resource URL of the request (SubjectAccessReview), as the kubelet and
// kube-rbac-proxy do. It is controller-runtime's filters.WithAuthenticationAndAuthorization
// without the API server libraries that one links.
func metricsAuthFilter(c *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	cs, err := kubernetes.NewForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, err
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), reviewTimeout)
			defer cancel()
			code, user := authorizeScrape(ctx, cs, r)
			if code != http.StatusOK {
				log.V(1).Info("metrics request refused", "user", user, "path", r.URL.Path, "status", code)
				http.Error(w, http.StatusText(code), code)
				return
			}
			next.ServeHTTP(w, r)
		}), nil
	}, nil
}

// authorizeScrape returns 200 for an authenticated and authorized request, 401 or 403
// otherwise (500 when a review cannot be asked), and the user it authenticated.
func authorizeScrape(ctx context.Context, cs kubernetes.Interface, r *http.Request) (int, string) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return http.StatusUnauthorized, ""
	}
	tr, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return http.StatusInternalServerError, ""
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, ""
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: r.URL.Path, Verb: strings.ToLower(r.Method)},
	}}, metav1.CreateOptions{})
	if err != nil {
		return http.StatusInternalServerError, u.Username
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, u.Username
	}
	return http.StatusOK, u.Username
}
