// Package returnpath makes the replies to a VIP leave a node with several networks by the
// interface its requests came in on, to the router on that network, instead of by the main
// table's default route, which may lead to another network (where a strict reverse-path
// filter, or no route back at all, loses them).
//
// It owns, for every interface that carries a VIP group and is not the one of the default
// route: a mark (bits 24-27 of the connection and packet marks; the data planes set it,
// dataplane.ReturnMark), a routing table of its own (returnplan.TableBase + the mark's slot) holding a
// default route via the group's router on that network, and two policy rules per family
// sending marked packets first to the main table with its default routes suppressed (so
// the node's own subnets and specific routes, the pod network among them, still apply),
// then to that table. A marked packet's forward lookup and its reverse-path check both
// use them (the latter once the interface's src_valid_mark is on, which the package sets);
// nothing else is ever looked up there.
//
// The decision is pure (internal/returnplan: interfaces and groups in, paths and what has no
// way back out); here the kernel is read (observe.go, main_table.go: the one reader of the main
// table, whose default routes the node's published gateways go by too) and written (routes.go)
// through netlink, and keeper.go runs observe, decide, apply. It must never write the main table,
// any rule or table outside its priorities and table range, any sysctl but src_valid_mark
// of the interfaces it marks, or any packet mark bit outside returnplan.MarkMask.
package returnpath
