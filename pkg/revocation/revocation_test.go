package revocation

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestBindingString(t *testing.T) {
	b := Binding{Kind: "RoleBinding", Namespace: "team", Name: "edit", RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}, Subject: rbacv1.Subject{Kind: rbacv1.UserKind, Name: "cl-a"}}
	assert.Equal(t, `RoleBinding "edit" in namespace "team" (ClusterRole "edit" to User "cl-a")`, b.String())
}

// TestSubjectKeys: the index lists a binding under each user and group it names, in the
// form the scan asks for, and under nothing else.
func TestSubjectKeys(t *testing.T) {
	subjects := []rbacv1.Subject{
		{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: "team"},
		{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "cl-a"},
		{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "liqo.io"},
	}
	want := []string{subjectKey(rbacv1.UserKind, "cl-a"), subjectKey(rbacv1.GroupKind, "liqo.io")}
	assert.Equal(t, []string{"User/cl-a", "Group/liqo.io"}, want)
	assert.Equal(t, want, subjectKeys(&rbacv1.RoleBinding{Subjects: subjects}))
	assert.Equal(t, want, subjectKeys(&rbacv1.ClusterRoleBinding{Subjects: subjects}))
	assert.Empty(t, subjectKeys(&rbacv1.RoleBinding{Subjects: subjects[:1]}))
	assert.Empty(t, subjectKeys(&rbacv1.Role{}))
}

// TestSettled: a proof that finds a grant the authorizer has not yet seen go is asked
// again until it finds nothing; one that keeps finding it reports it once the window has
// passed; an error ends it at once.
func TestSettled(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		answers   [][]string
		err       error
		within    time.Duration
		wantLeft  []string
		wantCalls int
	}{
		{"nothing left at once", [][]string{nil}, nil, time.Second, nil, 1},
		{"the authorizer catches up", [][]string{{"get tenants"}, {"get tenants"}, nil}, nil, 5 * time.Second, nil, 3},
		{"a grant that stays", [][]string{{"get tenants"}}, nil, 100 * time.Millisecond, []string{"get tenants"}, -1},
		{"an error ends it", [][]string{{"get tenants"}}, boom, 5 * time.Second, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			left, err := Settled(context.Background(), tc.within, func(context.Context) ([]string, error) {
				a := tc.answers[min(calls, len(tc.answers)-1)]
				calls++
				if tc.err != nil {
					return nil, tc.err
				}
				return a, nil
			})
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if !slices.Equal(left, tc.wantLeft) {
				t.Fatalf("left = %v, want %v", left, tc.wantLeft)
			}
			if tc.wantCalls >= 0 && calls != tc.wantCalls {
				t.Fatalf("asked %d times, want %d", calls, tc.wantCalls)
			}
			if tc.wantCalls < 0 && calls < 2 {
				t.Fatalf("a grant that stays was asked %d times: not again within the window", calls)
			}
		})
	}
}

// TestSettledCutShort: a proof cut short by its context proves nothing either way: it
// returns the context's error with what it last found.
func TestSettledCutShort(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	left, err := Settled(ctx, time.Minute, func(context.Context) ([]string, error) {
		cancel()
		return []string{"get tenants"}, nil
	})
	if !errors.Is(err, context.Canceled) || !slices.Equal(left, []string{"get tenants"}) {
		t.Fatalf("got %v, %v; want [get tenants], context.Canceled", left, err)
	}
}
