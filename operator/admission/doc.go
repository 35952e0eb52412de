// Package admission decides which waiting node may start its reboot cycle now. It is pure: no
// Kubernetes client, informer or lister, no network of its own (blockers, which may reach Prometheus,
// are called through the Blocker interface with a bound); every answer is a function of the nodes'
// entries, the pause switch, the configuration and the instant given.
//
// What it holds:
//
//   - [Index]: one [Node] entry per node (what admission reads of it: group, control plane, whether it
//     counts against the budget, its state, how long it has waited) with the pool counts kept
//     incrementally, and the reservations of nodes whose admission is being written.
//   - [Pools]: the one function that says what counts against which budget; the status view calls it
//     with the configuration the operator publishes, the Index keeps the same counts incrementally
//     (TestIndexMatchesPools).
//   - The chain ([Chain]): an ordered list of gates, each a small function of (node, fleet, time) that
//     lets the node pass or holds it with a [Kind] and a reason: the reboot window, the pause
//     switches, fleet-wide blockers, the control-plane order, the budgets, per-node blockers. A
//     new policy is one more gate.
//   - [Admitter]: runs the chain one decision at a time and reserves an admitted node in every pool
//     until its admission is written.
//
// # Lock order
//
// Admitter.mu (one decision at a time) → Index.mu → whatever the Index's getter or a blocker takes
// (the controller's informer store and overlay). Nothing here holds a lock across a network call
// except blockers, which run under Admitter.mu bounded by Config.CheckTimeout each.
package admission
