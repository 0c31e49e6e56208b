// Package wire is the protocol's vocabulary: the names, labels, annotations, Secret keys
// and the group (liqo.io) that both clusters, Liqo's controllers and this project's agree
// on (docs/protocol.md), and the labels this implementation adds. Every other package
// refers to them through here, so a name is checked by one definition.
package wire
