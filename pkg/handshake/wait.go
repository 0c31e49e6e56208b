package handshake

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cond looks at the object being waited for (nil when it does not exist) and says whether
// the wait is over, and in words the state it sees, for the message of a timeout.
type Cond[T client.Object] func(T) (done bool, state string, err error)

// waitFor watches one object until cond says it is done. The watch starts from the
// resourceVersion of a first list, so no change is missed between the two; a closed watch
// is re-established.
func waitFor[T client.Object](ctx context.Context, c client.WithWatch, key client.ObjectKey, list client.ObjectList, what string, cond Cond[T]) error {
	var none T
	return waitFrom(ctx, c, key, none, list, what, cond)
}

// waitFrom is waitFor from the object as this command last wrote it (from; none: nil):
// its write's answer is the object's state at its resourceVersion, so cond looks at it,
// and the watch starts after it, without the first list. A watch that cannot start there
// (its resourceVersion too old for the API server, or too new for another behind the same
// address), or that closes, is re-established from a list, as waitFor's.
func waitFrom[T client.Object](ctx context.Context, c client.WithWatch, key client.ObjectKey, from T, list client.ObjectList, what string, cond Cond[T]) error {
	sel := []client.ListOption{client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name}}
	var last string
	rv, done, err := decideFrom(from, cond, &last)
	if done || err != nil {
		return err
	}
	listed := rv == ""
	for {
		if rv == "" {
			if rv, done, err = listAndDecide(ctx, c, list, sel, what, cond, &last); done || err != nil {
				return err
			}
			listed = true
		}
		w, err := c.Watch(ctx, list, append(sel, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})...)
		if err != nil && !listed && ctx.Err() == nil {
			// Not from from's version (too old for the API server, or too new for one of
			// several that has not caught up): from a list, then, once.
			rv = ""
			continue
		}
		if err != nil {
			return timeoutOr(ctx, err, what, last)
		}
		done, err = consume(ctx, w, cond, &last)
		w.Stop()
		if done || err != nil {
			return err
		}
		if ctx.Err() != nil {
			return timeoutOr(ctx, ctx.Err(), what, last)
		}
		rv = ""
	}
}

// decideFrom has cond decide on from, the object as the command wrote it (nil: none, or
// without a resourceVersion: nothing to decide), keeping cond's state in last; it returns
// from's resourceVersion, for the watch that follows.
func decideFrom[T client.Object](from T, cond Cond[T], last *string) (string, bool, error) {
	if v := reflect.ValueOf(from); !v.IsValid() || v.IsNil() || from.GetResourceVersion() == "" {
		return "", false, nil
	}
	done, state, err := cond(from)
	*last = state
	return from.GetResourceVersion(), done, err
}

// listAndDecide lists the object waited for (sel) and has cond decide on it (nil when it
// does not exist), keeping cond's state in last; it returns the list's resourceVersion,
// for the watch that follows.
func listAndDecide[T client.Object](ctx context.Context, c client.WithWatch, list client.ObjectList, sel []client.ListOption, what string, cond Cond[T], last *string) (string, bool, error) {
	if err := c.List(ctx, list, sel...); err != nil {
		return "", false, timeoutOr(ctx, err, what, *last)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return "", false, err
	}
	var obj T
	if len(items) == 1 {
		obj = items[0].(T)
	}
	done, state, err := cond(obj)
	*last = state
	return list.GetResourceVersion(), done, err
}

// recheck is how often a wait decides again on the object it saw last, with no new event:
// a condition may depend on time (a refusal given a grace, tenantDone).
const recheck = 500 * time.Millisecond

func consume[T client.Object](ctx context.Context, w watch.Interface, cond Cond[T], last *string) (bool, error) {
	tick := time.NewTicker(recheck)
	defer tick.Stop()
	var seen T
	var have bool
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case <-tick.C:
			if !have {
				continue
			}
			done, state, err := cond(seen)
			*last = state
			if done || err != nil {
				return done, err
			}
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return false, nil
			}
			obj, isT := ev.Object.(T)
			if !isT {
				continue
			}
			if ev.Type == watch.Deleted {
				var zero T
				obj = zero
			}
			seen, have = obj, true
			done, state, err := cond(obj)
			*last = state
			if done || err != nil {
				return done, err
			}
		}
	}
}

// waitObject waits on side s for the object key until cond says it is done, from the
// object as this command last wrote it when it did (from, see waitFrom; none: nil); its
// deletion ends the wait with an error. It returns the object as last seen, and explains
// an error as doing something on that side.
func waitObject[T client.Object](ctx context.Context, s *Side, key client.ObjectKey, from T, list client.ObjectList, what, doing string, cond func(T) (bool, string, error)) (T, error) {
	var out T
	err := waitFrom(ctx, s.Client, key, from, list, what, func(obj T) (bool, string, error) {
		if v := reflect.ValueOf(obj); !v.IsValid() || v.IsNil() {
			return false, "", fmt.Errorf("%s was deleted", key)
		}
		out = obj
		return cond(obj)
	})
	if err != nil {
		var zero T
		return zero, s.Explain(err, doing)
	}
	return out, nil
}

// ErrTimeout is returned when a wait runs out of time.
var ErrTimeout = errors.New("timed out")

// timeoutOr explains err as the end of a wait when the wait's context is done: out of
// time (ErrTimeout, with the state last seen), or cancelled (the user interrupted the
// command: context.Canceled, never a timeout, which would send them looking for a
// manager that is fine).
func timeoutOr(ctx context.Context, err error, what, last string) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("interrupted while waiting for %s: %w", what, context.Canceled)
	}
	if ctx.Err() != nil {
		if last != "" {
			return fmt.Errorf("%w waiting for %s (%s)", ErrTimeout, what, last)
		}
		return fmt.Errorf("%w waiting for %s", ErrTimeout, what)
	}
	return err
}
