// Package ledger holds the rules of the IP ledger (one paasv1.IP object per
// allocated address): which kind of object it is, whom it holds the address
// for, and the allocator key each holder goes by. The operator, the agents
// and the explain command read the same objects, so they ask these functions
// rather than read spec.owner, spec.sharedWith and the owner annotation
// themselves.
//
// It is pure: it reads the objects it is given and never lists, writes or
// caches any, and imports nothing of this project but api/v1.
package ledger
