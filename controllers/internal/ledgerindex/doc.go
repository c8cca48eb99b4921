// Package ledgerindex is the informer cache's index of the IP ledger by
// IPGroup label, which the Service reconciler (the Services an IPGroup's
// change may move) and the IPGroup reconciler (the addresses a group counts)
// both read. Registering it once per cache, whichever reconciler is set up
// first, is its job; it never writes a ledger object.
package ledgerindex
