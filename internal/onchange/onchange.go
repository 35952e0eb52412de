// Package onchange has the informer handler the controllers use where only "something changed"
// matters: the node controller's gates, the fleet store's ConfigMaps and the blockers' pods.
package onchange

import "k8s.io/client-go/tools/cache"

// Any calls f on every add, update and delete.
func Any(f func()) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { f() },
		UpdateFunc: func(interface{}, interface{}) { f() },
		DeleteFunc: func(interface{}) { f() },
	}
}
