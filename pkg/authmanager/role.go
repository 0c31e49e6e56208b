package authmanager

import "github.com/liqo-auth/liqo-auth/pkg/access"

// Role is the side of the handshake a cluster's controllers play (access.Role).
type Role = access.Role

// The roles.
const (
	Provider = access.Provider
	Consumer = access.Consumer
	Both     = access.Both
)
