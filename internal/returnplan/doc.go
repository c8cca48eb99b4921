// Package returnplan decides, purely, how replies to a VIP get back to the network their
// requests came in on, for a node with several networks: from its interfaces (their subnets,
// the routers its main table reaches by them, which one holds the default route) and the VIP
// groups, which interfaces need a way back, with which mark, routing table and router, and
// which groups have none. The agent applies the plan (nodeagent/returnpath); the operator
// reads the same decision, from what each agent publishes of its interfaces, into the
// IPGroup's ReturnPath condition. It imports no Kubernetes client and touches no kernel.
package returnplan
