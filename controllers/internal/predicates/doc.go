// Package predicates holds the event filters several reconcilers share: an
// IPGroup change that changes what the group hands out or keeps, and a Node
// change that changes whether it can announce. They read the old and new
// object only; they never read the cluster.
package predicates
