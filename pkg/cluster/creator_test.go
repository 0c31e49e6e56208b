package cluster

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

func TestCreatorListRoundTrip(t *testing.T) {
	for _, groups := range [][]string{
		nil,
		{""},
		{"system:authenticated"},
		{"dev,system:masters"},
		{"a%2Cb", "%", "=;,", "", "ü\u202e"},
	} {
		enc := EncodeCreatorList(groups)
		got, err := DecodeCreatorList(enc)
		if err != nil || !reflect.DeepEqual(got, groups) {
			t.Errorf("%q: encoded %q, decoded %q, %v", groups, enc, got, err)
		}
	}
}

func TestCreatorListRefusesOtherFormats(t *testing.T) {
	for _, s := range []string{
		"dev,system:masters", // the comma-joined format of older policies
		"system:masters",     // one group, unterminated
		"a=b,",               // unescaped separator
		"a%2,",               // partial escape
		"a%41,",              // an escape the encoder never writes
		"a%",                 // unterminated and partial
	} {
		if got, err := DecodeCreatorList(s); err == nil {
			t.Errorf("%q decoded as %q, want an error", s, got)
		}
	}
}

func TestCreatorExtra(t *testing.T) {
	extra := map[string][]string{"scopes.example.com": {"a,b", "c"}, "k=;": {}, "": {""}}
	enc := EncodeCreatorExtra(extra)
	got, err := DecodeCreatorExtra(enc)
	if err != nil || !reflect.DeepEqual(got, extra) {
		t.Fatalf("encoded %q, decoded %v, %v", enc, got, err)
	}
	for _, s := range []string{"k=v,", "k=v,;k=w,;", "kv,;", "k=v;"} {
		if _, err := DecodeCreatorExtra(s); err == nil {
			t.Errorf("%q decoded, want an error", s)
		}
	}
}

func TestNamespaceCreator(t *testing.T) {
	ns := func(a map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Annotations: a}}
	}
	if _, ok, err := NamespaceCreator(ns(nil)); ok || err != nil {
		t.Errorf("no annotation: ok %v, err %v", ok, err)
	}
	c, ok, err := NamespaceCreator(ns(map[string]string{wire.CreatedByAnnotation: "alice", wire.CreatedByUIDAnnotation: "u-1",
		wire.CreatedByGroupsAnnotation: EncodeCreatorList([]string{"dev,system:masters"}), wire.CreatedByExtraAnnotation: "k=v,;"}))
	want := Creator{User: "alice", UID: "u-1", Groups: []string{"dev,system:masters"}, Extra: map[string][]string{"k": {"v"}}}
	if !ok || err != nil || !reflect.DeepEqual(c, want) {
		t.Errorf("got %+v, %v, %v", c, ok, err)
	}
	if c, ok, err := NamespaceCreator(ns(map[string]string{wire.CreatedByAnnotation: "alice", wire.CreatedByGroupsAnnotation: "dev,system:masters"})); !ok || err == nil {
		t.Errorf("the old comma-joined format must be an error, got %+v, %v", c, err)
	}
}

// FuzzDecodeCreatorList checks that whatever decodes encodes back to itself: one list has
// one encoding, so no two creators read alike.
func FuzzDecodeCreatorList(f *testing.F) {
	for _, s := range []string{"", ",", "a,b,", "dev%2Csystem:masters,", "a%25%3D%3B,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items, err := DecodeCreatorList(s)
		if err != nil {
			return
		}
		if back := EncodeCreatorList(items); back != s {
			t.Fatalf("%q decoded as %q, which encodes as %q", s, items, back)
		}
	})
}
