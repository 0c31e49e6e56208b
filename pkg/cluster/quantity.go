package cluster

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func intstrFromName(name string) intstr.IntOrString { return intstr.FromString(name) }
