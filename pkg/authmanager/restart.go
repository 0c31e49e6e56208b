package authmanager

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// restartCondition is what a restarting Runnable waits for: the objects list selects
// (listed, then watched from that list's version, listed again when the watch closes) until
// one is met. met is told whether the object came in a deletion event.
type restartCondition struct {
	client  client.WithWatch
	newList func() client.ObjectList
	opts    []client.ListOption
	met     func(obj runtime.Object, deleted bool) bool
	// reached is what the wait returns once an object is met; what names the wait in errors.
	reached error
	what    string
}

// wait returns c.reached once an object is met, nil when ctx ends first, and an error when a
// list or watch fails.
func (c restartCondition) wait(ctx context.Context) error {
	for {
		list := c.newList()
		if err := c.client.List(ctx, list, c.opts...); err != nil {
			return fmt.Errorf("%s: %w", c.what, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return fmt.Errorf("%s: %w", c.what, err)
		}
		for _, o := range items {
			if c.met(o, false) {
				return c.reached
			}
		}
		w, err := c.client.Watch(ctx, c.newList(), append(c.opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})...)
		if err != nil {
			return fmt.Errorf("%s: %w", c.what, err)
		}
		if done, err := c.until(ctx, w); done || err != nil {
			return err
		}
	}
}

// until reads w until an object is met (done, c.reached), ctx ends (done, nil) or the watch
// closes (not done: listed and watched again).
func (c restartCondition) until(ctx context.Context, w watch.Interface) (bool, error) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			if c.met(ev.Object, ev.Type == watch.Deleted) {
				return true, c.reached
			}
		}
	}
}
