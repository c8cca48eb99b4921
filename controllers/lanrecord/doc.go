// Package lanrecord is the reconciler of the records of addresses in use on
// the LAN: an IP object no Service holds, kept because a host on the LAN
// answered for its address. Once the verdict is cleared (a silent recheck),
// it deletes the record, which frees the address.
//
// It deletes only such records, with their uid and resourceVersion as
// preconditions; it must never touch an IP object a Service holds, nor write
// the verdict (the agents probe and write it).
package lanrecord
