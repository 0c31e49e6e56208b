package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestAuthorizeScrape(t *testing.T) {
	cases := []struct {
		name          string
		header        string
		authenticated bool
		allowed       bool
		reviewErr     error
		want          int
	}{
		{name: "no token", header: "", want: http.StatusUnauthorized},
		{name: "not a bearer token", header: "Basic abc", want: http.StatusUnauthorized},
		{name: "token the API server does not know", header: "Bearer t", want: http.StatusUnauthorized},
		{name: "user not allowed to get /metrics", header: "Bearer t", authenticated: true, want: http.StatusForbidden},
		{name: "user allowed", header: "Bearer t", authenticated: true, allowed: true, want: http.StatusOK},
		{name: "review failed", header: "Bearer t", reviewErr: errors.New("down"), want: http.StatusInternalServerError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			var asked *authorizationv1.SubjectAccessReview
			cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: tc.authenticated, User: authenticationv1.UserInfo{Username: "prometheus", Groups: []string{"g"}}}
				return true, tr, tc.reviewErr
			})
			cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				asked = a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
				asked.Status.Allowed = tc.allowed
				return true, asked, nil
			})
			r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			code, _ := authorizeScrape(context.Background(), cs, r)
			assert.Equal(t, tc.want, code)
			if asked != nil {
				assert.Equal(t, "prometheus", asked.Spec.User)
				assert.Equal(t, []string{"g"}, asked.Spec.Groups)
				assert.Equal(t, &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}, asked.Spec.NonResourceAttributes)
			}
		})
	}
}
